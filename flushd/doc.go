// Package flushd moves read signals from the deltas topic (package delta)
// into MySQL in micro-batches: it is the only writer of
// message_read_record.is_read and of each signal's first time (button_at,
// link_at, enter_at).
//
// # Batching
//
// A Flusher is a Kafka consumer group member. Per partition and message it
// keeps the dirty uids (a roaring bitmap) with each uid's FIRST (minimum)
// counted read and its source, and the first time of each signal (Read). A
// delta that counts (delta.Delta.Counted) gives both; one that does not
// only its signal's time. A message is flushed when it has
// Options.BatchSize dirty uids or when its oldest pending read is
// Options.Interval old, with one statement per at most BatchSize uids and
// every value bound as a parameter: the reads travel as one JSON array
// that JSON_TABLE turns into rows joined to their recipient rows by
// primary key. A read of one time (a delta carries one signal, so nearly
// every read: its counted read, if any, and its signal at the same
// CreateTime) travels compact, as [uid,"time",source,bits], source 0 for
// nothing counted and bits the signal columns that take the time (1
// button, 2 link, 4 enter):
//
//	UPDATE JSON_TABLE(?, '$[*]' COLUMNS(uid INT UNSIGNED PATH '$[0]',
//	    t DATETIME PATH '$[1]', src INT UNSIGNED PATH '$[2]',
//	    sig INT UNSIGNED PATH '$[3]')) AS d
//	  STRAIGHT_JOIN message_read_record r
//	    ON r.corp_id = ? AND r.msgid = ? AND r.uid = d.uid
//	SET r.is_read   = IF(d.src > 0, 1, r.is_read),
//	    r.read_time = IF(r.read_time IS NULL AND d.src > 0, d.t, r.read_time),
//	    r.source    = IF(r.source = 0, d.src, r.source),
//	    r.button_at = IF(r.button_at IS NULL AND (d.sig & 1) > 0, d.t, r.button_at),
//	    … link_at (2), enter_at (4) alike
//	WHERE (r.is_read = 0 AND d.src > 0)
//	   OR (r.button_at IS NULL AND (d.sig & 1) > 0) OR … link, enter
//
// The few reads with several times (two signals of one member merged in
// one batch) go in a second statement of the same shape whose rows carry
// every time, [uid,"read_time",source,"button_at","link_at","enter_at"]
// (N, 1000-01-01 00:00:00, for "no such time"), guarded by d.button > N
// and so on. MySQL parses every DATETIME of the JSON: the compact form
// parses one a read instead of four, and took 70-75 % of the full form's
// time for the same 50,000 card presses on MariaDB 10.11
// (BenchmarkFlushInterleaved, %full).
//
// Each assignment reads only its own column's old value (and d): MySQL
// documents no order for the assignments of a multi-table UPDATE, so none
// may depend on another's new value. read_time and source are empty exactly
// while is_read = 0 (they are only ever set together), so their guards are
// the is_read = 0 guard.
//
// It does what the contract's "SET read_time = CASE uid WHEN ? THEN ? …
// WHERE is_read = 0 AND uid IN (…)" does. MariaDB 10.6+, MySQL 8.0.4+ and
// go-mysql-server (internal/embedded) have JSON_TABLE. Measured on MariaDB
// 10.11 with 5000 uids a statement (BenchmarkFlushInterleaved; the figures
// of this paragraph are the full form's): 1.6x the
// previous join against 5000 "SELECT ?,?,? UNION ALL" rows (whose 15,000
// placeholders cost as much to parse and bind as the rows cost to update),
// 4-5x the CASE form, about 90% of the same UPDATE … IN (…) writing one
// read_time for all uids (BenchmarkRawUpdateInTimes) and 15-20x one UPDATE
// per read (BenchmarkPerRow). A bare "SET is_read = 1 … IN (…)"
// (BenchmarkRawUpdateIn) was twice as fast as any statement that writes
// read_time while the table was DYNAMIC: there a NULL takes no bytes, so
// filling read_time grew every row and InnoDB could not rewrite it in
// place. Migration 00009 makes the table REDUNDANT, which reserves a NULL
// DATETIME's bytes, so a read updates its row in place: the same flush on
// freshly registered rows takes ~70 % of its time under DYNAMIC
// (BenchmarkRowFormat, both formats in one loop).
//
// # The evidence ledger
//
// With Options.Ledger (cmd always sets it) a batch is one transaction
// (READ COMMITTED) with its page events and its ledger entries: a locking
// read of the batch's rows (SELECT uid, is_read, button_at IS NULL, …
// uid IN (…) FOR UPDATE: the rows its reads may change, i.e. unread or
// with a signal column still NULL, and every row with a page event), the
// page events page_signals already has, the batch's statements, the page
// events not kept yet (INSERT INTO page_signals), then one ledger.Signal
// entry per row a counted read made read (and per parked read applied on
// the way; a page event that made it read lends its version, IP and
// User-Agent), one page entry per page_signals row added, and one seen
// entry per signal column (button_at, link_at, enter_at) it set at a time
// neither records (a press that does not count, a link after the read:
// issue 48), the corp's ledger head lock, the entries' block, COMMIT
// (package ledger, docs/evidence.md). A redelivered batch finds its rows
// read and its events kept and appends nothing; a batch killed or failing
// before COMMIT leaves neither rows, nor events, nor entries
// (TestLedgerKill9, TestPageEventsInLedgerTransaction); two replicas
// writing one uid serialize on its row, two writing one corp on its head
// for the block's INSERT and the COMMIT only.
//
// A batch of counted reads of one time each without page events (a storm
// of card presses) first tries without the locking read (writeAllNew):
// one UPDATE of its rows still unread. When it changed a row per read,
// every read made its row read and has its entry; otherwise (a replay, a
// row read before, a read without its row) the transaction is rolled
// back and the batch takes the path above
// (yidu_flushd_ledger_fallbacks_total). It spares MySQL a second walk of
// the batch's rows (docs/benchmarks.md, The evidence ledger). On
// go-mysql-server (the demo's embedded MySQL) a ROLLBACK left part of
// that UPDATE in place, so there every batch takes the locking path
// (Options.LockFirst, LockFirstFor).
//
// # Statement forms
//
// The statements above are StatementJSONTable. Servers without JSON_TABLE
// (TiDB; MariaDB before 10.6, MySQL before 8.0.4) get StatementCase
// (writer_case.go): every value bound, one CASE uid WHEN ? THEN ? … END
// per column, on "WHERE corp_id = ? AND msgid = ? AND uid IN (…)", with
// the same guards and the same RowsAffected (changed rows), split at 5461
// uids to stay under 65,535 placeholders. StatementFor picks the form from
// the server's family and VERSION() (config mysql.dialect, "auto" by
// default). Measured on MariaDB 10.11 with 50,000 card presses
// (BenchmarkStatementForms, both forms in one loop): the CASE form takes
// 4.2x the time of JSON_TABLE. Both forms run the same behaviour tests on
// MariaDB (TestStatementForms) and a smoke test on go-mysql-server
// (TestStatementFormsMySQLDialect).
//
// The guards make every statement idempotent: a read never goes back to
// unread, the first read_time and source written are kept, and so is each
// signal's first time, so replaying a delta changes nothing. The
// benchmarks' reads are card presses, as their deltas write them: is_read,
// read_time, source and button_at. With the signal columns and their guards
// the statement takes 86-107% of the time of the previous one, which wrote
// is_read, read_time and source only (BenchmarkFlushInterleaved, %prev, on
// a shared machine).
//
// # Offsets
//
// Auto-commit is off. Per partition the Flusher commits the offset of its
// earliest delta that is not yet written (or one past the last record read),
// only after the rows are committed, so a crash replays and never loses.
// Malformed records count as done: they can never become valid.
//
// When partitions are revoked (rebalance, shutdown) their pending deltas are
// flushed and committed before they are given up, within DrainTimeout. When
// they are lost (fenced, session expired) the pending deltas are dropped
// without committing: the new owner replays them. Writing twice is harmless;
// losing is not.
//
// # Group membership
//
// A member that stops heartbeating (kill -9, a lost host) keeps its
// partitions for Options.SessionTimeout (10 s; franz-go's default is 45 s)
// before the group hands them on; nothing is lost meanwhile, the reads wait
// in Kafka. With Options.InstanceID the Flusher is a static member: a
// restart with the same ID (a StatefulSet pod) takes its partitions back at
// once without a rebalance (TestFlusherStaticMember: about 0.1 s against a
// 30 s session timeout), but a static member never leaves on shutdown, so a
// scaled-down one holds its partitions for the session timeout.
//
// # Orphans
//
// A delta whose recipient row does not exist yet (registration still writing
// rows, or a race) is neither lost nor dropped silently. When an UPDATE
// changes fewer rows than it has uids, one SELECT finds the uids without a
// row; they are parked in read_orphans with what they carry (a counted
// read, each signal's time; INSERT … ON DUPLICATE KEY UPDATE keeping what a
// uid parked first, as the UPDATE keeps a row's) and counted in
// yidu_flushd_orphans_total. Registration calls ApplyOrphans after writing a
// message's recipient rows; the Writer calls it too right after parking,
// which closes the race where the rows appear between its SELECT and its
// INSERT. ApplyOrphans writes orphans into their rows with the UPDATE's
// guards and deletes an orphan only once its row holds everything it
// carries, so whichever side runs last applies it. Orphans of a message
// that never gets rows stay in read_orphans (visible, counted).
//
// # Malformed records
//
// A record whose value delta.Unmarshal rejects (an unknown version, source
// or flag included), or whose fields cannot be stored (corp_id or msgid not
// fitting the schema, read_time outside what DATETIME holds), is counted in
// yidu_flushd_malformed_total, logged without its content and skipped: it
// can never become valid, and retrying it would stop its partition forever.
//
// # MySQL failures and backpressure
//
// Failed statements are retried with capped exponential backoff while the
// Flusher keeps consuming, up to Options.MaxPending pending uids; then it
// pauses fetching until a flush succeeds. Offsets are not committed past
// anything unwritten meanwhile.
//
// # The live view (Options.Live)
//
// Right after each batch's statement, before the offsets are committed,
// the Flusher hands the batch's uids to its LiveView (bitmap.Healer): the
// read bit of each counted read and the signal bit of each signal, set in
// Redis only where the message's recipients bitmap has the uid, never
// clearing one; a message Redis lacks is restored from MySQL. So Redis
// converges to MySQL by itself after it lost data, and gets the bits of
// reads the receiver published unmarked while it was down. A Redis failure
// never holds MySQL back: the bits wait in a backlog of at most MaxPending,
// retried every ≤ 2 s (yidu_flushd_live_*).
//
// # Deltas by UserID (Options.Members)
//
// A delta that names its member by UserID (delta version 3: the receiver
// could not map it, MySQL being down) is mapped to its uid when its batch
// is flushed (idmap.Mapper); a lookup error fails the flush like a failed
// statement (retried, not committed past), an unknown UserID is dropped
// and counted (yidu_flushd_unknown_userids_total).
package flushd
