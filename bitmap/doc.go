// Package bitmap is the heart of the read path: a read signal from WeCom
// becomes a bit in Redis and a durable delta in Kafka, exactly once in
// effect, within the 5 s WeCom waits for an answer (path 90238).
//
// Signals are kept apart (yidu.Signal): a card button press, a tracked link
// opened, an app entry (enter_agent) and the reading page's read_to_end and
// acknowledged each set their own bitmap; only a signal that counts as read
// sets the read bit too: the message's read rule's signal when it has one
// (meta rule, yidu.ReadRule), else those its app lists
// (yidu.App.ReadSignals). The Recorder decides, and the delta carries the decision to
// flushd, so Redis's read bitmap and MySQL's is_read follow the same one.
//
// # Key scheme
//
// Every key starts with Options.Prefix (default "yidu"). The prefix must not
// contain '{' or '}': the braces below are Redis Cluster hash tags, so the
// keys of one message share a slot and one Lua script can touch them all.
//
//	<p>:m:{<corp>/<msgid>}:rcpt   string bitmap, bit uid = 1 for a recipient
//	<p>:m:{<corp>/<msgid>}:read   string bitmap, bit uid = 1 once read: a
//	                              signal that counts for the app was seen
//	<p>:m:{<corp>/<msgid>}:<signal> one string bitmap per signal: button,
//	                              link, enter_agent (yidu.Signal.String); bit
//	                              uid = 1 once the member gave it, counted
//	                              or not
//	<p>:m:{<corp>/<msgid>}:pend   hash "<uid>:<signal code>" → lease deadline
//	                              (unix ms) and 'c' (counted) or 'u': signals
//	                              whose bit is set but whose delta Kafka has
//	                              not acknowledged yet
//	<p>:m:{<corp>/<msgid>}:meta   hash app, agent_id, title, sent_at_ms, recipients,
//	                              rule (the read rule's signal code, 0: the
//	                              app's read signals decide)
//	<p>:m:{<corp>/<msgid>}:tmp    scratch for BITOP OR inside one script
//	<p>:a:{<corp>/<agentid>}:msgs sorted set msgid → ceil(sent_at) unix s; the
//	                              member "" (score 0) says the set is complete
//	<p>:a:{<corp>/<agentid>}:cur  hash uid → unix s: the member's enter_agent
//	                              cursor, moved only forward
//	<p>:dd:<sha256(key)[:16] hex> receiver de-duplication (Seen/Remember)
//
// Bitmaps use Redis bit order: bit n is bit 7-n%8 of byte n/8 (bit 0 is the
// most significant bit of byte 0); FromRedis and ToRedis convert to roaring.
// The read and signal bitmaps hold recipients only (the mark checks rcpt; a
// restore ANDs them with it), so each one's BITCOUNT counts recipients.
// Keys expire Options.TTL (default 30 days) after the last activity: a
// registration or a restore refreshes every key of the message, a new
// signal too unless they were refreshed within the last minute (TTL/100 if
// shorter), when it only gives a key it created the TTL: PEXPIRE is most of
// a mark's cost.
//
// The pending set is a hash with a lease rather than a bare bitmap so that
// two concurrent attempts on one signal (a double tap, a WeCom retry racing
// the first try) emit one delta, while an attempt that died still gets its
// delta re-emitted by the next one once the lease (Options.Lease, default 3
// s, below WeCom's 5 s retry) has run out. A lease belongs to one (signal,
// uid): a member's button press is new while their enter_agent is in
// flight, and each is acked, released and re-emitted on its own. The lease
// keeps whether the signal counted, so a re-emission counts as the attempt
// that set the bits decided.
//
// # Order of operations and why no crash point loses a read
//
// Recorder does, for every signal:
//
//  1. Mark (one Lua script per message, atomic): a recipient whose bit of
//     this signal is 0 gets it (and the read bit, if the signal counts) and
//     a pending lease → new. A set bit with an expired lease (an earlier
//     attempt that never acknowledged) → new again. A set bit with a live
//     lease → in flight (another attempt owns the delta). A set bit with no
//     lease → duplicate.
//  2. Publish the new reads' deltas and wait until Kafka acknowledged every
//     one (acks=all, idempotent producer).
//  3. Ack: delete the pending entries (queued, not waited for:
//     Store.AckAsync).
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
// only WHERE is_read = 0, a signal's time only while its column is empty).
// An ack still queued, or lost, is the same stale lease. After 4 WeCom's
// retry (an answer lost) finds a duplicate, or an in-flight lease it waits
// out. When Redis loses data
// the Recorder restores the message from MySQL (RestoreReads ORs the
// recipients, reads and each signal's members in) and re-marks; signals
// still in Kafka reach MySQL through flushd, and one that would be
// re-marked new is emitted again, harmlessly.
//
// The mark script reads the server clock (TIME) before writing, which
// needs Redis ≥ 5 (effect replication, the default since then).
//
// # Batching
//
// Mark, Ack and Release go through a bounded queue: a loop goroutine
// (Options.Loops, default one) sends up to Options.MaxBatch queued calls
// as one pipeline and, while it is in flight, the next callers queue
// behind it, so concurrent callbacks share Redis round trips and the
// batches grow with the load. Within a
// pipeline the marks of one message, signal, agent and decision are merged
// into one EVALSHA carrying every caller's uids (in queue order, each
// caller handed its own outcomes), and the acks of one message into one
// HDEL: in the 9:00 storm a pipeline of many callers' marks costs Redis
// one Lua call instead of one per caller. A full queue is ErrQueueFull
// (the receiver answers 503), never a silent drop; AckAsync, which nobody
// waits for, counts a full queue or a failed pipeline as an ack error.
//
// The reading page's own commands travel in the same pipelines (issue
// 50): Pipelined queues a caller's commands (a session, a view, a
// reader's marks) and Script a caller's script (a reader's done mark),
// each answered once the batch has run, so a signed-in reader makes no
// round trip of its own; with the queue full they go in one of their own.
package bitmap
