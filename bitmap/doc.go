// Package bitmap is the heart of the read path: a read signal from WeCom
// becomes a bit in Redis and a durable delta in Kafka, exactly once in
// effect, within the 5 s WeCom waits for an answer (path 90238).
//
// # Key scheme
//
// Every key starts with Options.Prefix (default "yidu"). The prefix must not
// contain '{' or '}': the braces below are Redis Cluster hash tags, so the
// keys of one message share a slot and one Lua script can touch them all.
//
//	<p>:m:{<corp>/<msgid>}:rcpt   string bitmap, bit uid = 1 for a recipient
//	<p>:m:{<corp>/<msgid>}:read   string bitmap, bit uid = 1 once read
//	<p>:m:{<corp>/<msgid>}:pend   hash uid → lease deadline (unix ms): reads
//	                              whose bit is set but whose delta Kafka has
//	                              not acknowledged yet
//	<p>:m:{<corp>/<msgid>}:meta   hash app, agent_id, title, sent_at_ms, recipients
//	<p>:m:{<corp>/<msgid>}:tmp    scratch for BITOP OR inside one script
//	<p>:a:{<corp>/<agentid>}:msgs sorted set msgid → ceil(sent_at) unix s; the
//	                              member "" (score 0) says the set is complete
//	<p>:a:{<corp>/<agentid>}:cur  hash uid → unix s: the member's enter_agent
//	                              cursor, moved only forward
//	<p>:dd:<sha256(key)[:16] hex> receiver de-duplication (Seen/Remember)
//
// Bitmaps use Redis bit order: bit n is bit 7-n%8 of byte n/8 (bit 0 is the
// most significant bit of byte 0); FromRedis and ToRedis convert to roaring.
// Keys expire Options.TTL (default 30 days) after the last activity: a new
// read, a registration or a restore refreshes every key of the message.
//
// The pending set is a hash with a lease rather than a bare bitmap so that
// two concurrent attempts on one read (a double tap, a WeCom retry racing
// the first try) emit one delta, while an attempt that died still gets its
// delta re-emitted by the next one once the lease (Options.Lease, default 3
// s, below WeCom's 5 s retry) has run out.
//
// # Order of operations and why no crash point loses a read
//
// Recorder does, for every signal:
//
//  1. Mark (one Lua script per message, atomic): a recipient whose read bit
//     is 0 gets the bit and a pending lease → new. A set bit with an expired
//     lease (an earlier attempt that never acknowledged) → new again. A set
//     bit with a live lease → in flight (another attempt owns the delta). A
//     set bit with no lease → duplicate.
//  2. Publish the new reads' deltas and wait until Kafka acknowledged every
//     one (acks=all, idempotent producer).
//  3. Ack: delete the pending entries.
//  4. Return; only now the receiver answers 200.
//
// A crash or failure before 1 wrote nothing, and WeCom retries because it
// got no 200. Between 1 and 2 the bit is set but the delta may be lost: the
// attempt answers 503 (after releasing its lease so the retry need not wait)
// or never answers; either way WeCom retries after its 5 s timeout, the lease
// has expired, and the retry re-emits the delta. Should every retry fail,
// the lease stays in the pending hash, so the next signal for that member
// and message re-emits it and a reconcile job can find it: a set bit never
// hides a read from MySQL. Between 2 and 3 the delta is durable; the stale
// lease only causes one harmless extra delta later (flushd applies a read
// only WHERE is_read = 0). Between 3 and 4 WeCom's retry finds a duplicate.
// When Redis loses data the Recorder restores the message from MySQL
// (RestoreMessage ORs the recipients and reads in) and re-marks; reads still
// in Kafka reach MySQL through flushd, and a read that would be re-marked
// new is emitted again, harmlessly.
//
// The mark script reads the server clock (TIME) before writing, which
// needs Redis ≥ 5 (effect replication, the default since then).
//
// # Batching
//
// Mark, Ack and Release go through a bounded queue: Options.Loops loop
// goroutines each collect up to Options.MaxBatch script calls and send them
// as one pipeline of EVALSHA, so concurrent callbacks share Redis round
// trips. A full queue is ErrQueueFull (the receiver answers 503), never a
// silent drop.
package bitmap
