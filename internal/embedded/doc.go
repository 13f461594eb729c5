// Package embedded runs a Redis-, a MySQL- and a Kafka-protocol server inside
// the process, so the demo (and tests on a machine with no servers) drive the
// very same drivers and code paths as production: alicebob/miniredis,
// dolthub/go-mysql-server (memory backend, database "yidu") and franz-go's
// kfake (topic yidu.reads, DefaultPartitions partitions).
//
// It is for the demo binary and tests only: nothing under cmd/yidu may import
// it. What follows is what the servers do and do not do for yidu, each point
// proved by a test in this package (go-mysql-server v0.20.0, miniredis
// v2.40.0).
//
// # MySQL (go-mysql-server, memory backend)
//
// Works, with the same results and RowsAffected as MariaDB/MySQL:
//   - migrations.Up applies 00001_init.sql unchanged: CHARACTER SET ascii,
//     COLLATE ascii_bin/utf8mb4_bin, TIMESTAMP(3) DEFAULT CURRENT_TIMESTAMP(3)
//     ON UPDATE CURRENT_TIMESTAMP(3) (it does update), DATETIME(3)
//     (milliseconds kept), ENGINE=InnoDB; utf8mb4_bin keeps "Alice" and
//     "alice" apart; duplicate keys fail with error 1062; Chinese and emoji
//     round-trip.
//   - multi-row INSERT IGNORE … VALUES (…),(…) of 5000 rows (RowsAffected
//     counts only new rows).
//   - UPDATE message_read_record SET is_read=1, read_time=CASE uid WHEN ? THEN
//     ? … END, source=CASE … END WHERE corp_id=? AND msgid=? AND is_read=0 AND
//     uid IN (…) with 5000 uids (15,002 placeholders); RowsAffected counts
//     changed rows only, a repeat changes 0.
//   - transactions: BEGIN … SELECT … FOR UPDATE … COMMIT, and ROLLBACK undoes.
//   - UPDATE uid_seq SET next_uid = LAST_INSERT_ID(next_uid + ?) followed by
//     SELECT LAST_INSERT_ID() on the same connection.
//   - INSERT … ON DUPLICATE KEY UPDATE col = LEAST(col, VALUES(col))
//     (RowsAffected 1 per insert, 2 per change), UPDATE … JOIN …, DELETE o
//     FROM … JOIN ….
//   - GROUP BY FLOOR(UNIX_TIMESTAMP(read_time)/60), with or without
//     time_zone='+00:00' in the DSN.
//
// Does not work as on InnoDB, and what this package does about it:
//   - Types of a UNION: go-mysql-server makes any two unequal non-numeric
//     column types LONGTEXT, so DATETIME UNION ALL DATETIME(3)
//     (reminder_log and manual_reminders in an evidence record) came back
//     as bytes no time.Time scans. The analyzer rule unionTimes makes such
//     a column DATETIME of the larger precision, as MariaDB does
//     (TestUnionDatetime).
//   - Concurrency: each session works on its own copy of a table, committed
//     last-writer-wins, and FOR UPDATE locks nothing; concurrent
//     LAST_INSERT_ID(next_uid + ?) updates lost increments and handed out
//     the same uid range twice. The server here therefore runs one statement
//     at a time, and holds that lock from START TRANSACTION to
//     COMMIT/ROLLBACK (serializable). A client that opens a transaction and
//     then waits on another connection gets error 1205 after
//     Options.LockWait, as InnoDB would on a row lock. Reading a large
//     result set slowly while writing on another connection can hit it too.
//   - Speed: memory tables find a row by scanning the whole table on every
//     insert and delete (an UPDATE is both), re-sort the table after each
//     statement, and an index lookup is a scan of every row tested against
//     each range, then sorted. Three things keep that affordable, each
//     measured on 2 loaded cores (load 10-16): the primary keys are not
//     offered to the planner as indexes (a flush UPDATE … IN of 500 uids
//     on a 2,000-row message took 10 s with them, 1.8 s without), the
//     planner never picks a lookup or merge join (scanCoster: flushd's
//     JSON_TABLE batch UPDATE of 400 uids, 5.7-11 s as a lookup join,
//     0.3-0.6 s hashed; the directory's 2,000 department memberships,
//     2.5 s merged, 29 ms hashed), and INSERT IGNORE … VALUES runs as INSERT … ON DUPLICATE
//     KEY UPDATE c = c (rewriteInsertIgnore: go-mysql-server treats every
//     row of an IGNORE insert as a statement of its own and re-sorts the
//     table after each). With them the demo's 2,000-person directory sync
//     takes about 5 s and the registration of its notice (2,000 rows and
//     the cards) about 5 s, against 20-50 s each before. Unique keys are
//     enforced as before (the table editor checks them itself). The cost
//     still grows with the square of a table's rows: keep embedded runs to
//     a few thousand recipients; 20,000 employees needs real servers.
//
// # Redis (miniredis)
//
// Works: EVAL and EVALSHA (go-redis Script.Run, SCRIPT EXISTS), Lua calling
// GETBIT/SETBIT/BITCOUNT/HSET (several fields)/ZADD/ZRANGEBYSCORE/EXPIRE,
// cjson in Lua, GET and GETRANGE of a bitmap with Redis's bit order (offset 0
// is the high bit of byte 0), BITOP OR, SET NX with TTL, pipelines and
// MULTI/EXEC pipelines, EXPIRE … NX.
//
// Does not: BITFIELD (unknown command). Keys expire only when the miniredis
// clock moves (Servers.Redis.FastForward), never by wall time, so a demo
// never expires anything. SETBIT at offset 2^32-1 allocates 512 MB, as Redis.
//
// # Kafka (kfake)
//
// kfake serves produce, fetch and consumer groups in memory; see
// internal/testenv for how tests use it.
package embedded
