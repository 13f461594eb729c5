package ledger

// StampOne is a replica's try at c's token as if it had picked c in the
// same turn as another (Ledger.stamp, past StampDue's selection).
var StampOne = (*Ledger).stamp
