-- +goose Up
-- Issue 40 item 2: the evidence ledger, an append-only log per corp of
-- every fact that makes evidence (package ledger, docs/evidence.md).
--
-- ledger_heads: one row per corp, the next entry's place. Every writer
-- locks it (FOR UPDATE) as the last lock of the transaction that makes
-- its fact durable, so seq is dense per corp and entries of concurrent
-- replicas serialize only for their INSERT and COMMIT. day never goes
-- back: an entry's day is the later of the head's day and the writer's
-- Asia/Shanghai calendar day, and sealing a day moves the head past it.
CREATE TABLE ledger_heads (
    corp_id  VARCHAR(64) CHARACTER SET ascii NOT NULL,
    next_seq BIGINT UNSIGNED NOT NULL,
    day      DATE NOT NULL,
    day_size BIGINT UNSIGNED NOT NULL,
    -- started_at: when the corp's ledger began; verify does not ask an
    -- entry of a read older than it (flushed before there was a ledger).
    started_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (corp_id)
) ENGINE=InnoDB;

-- ledger_blocks: the entries, one row per append (a flushd batch, a send
-- batch, a version): count entries of one kind and one message, seq
-- first_seq … first_seq+count-1 per corp without gaps, day_index
-- first_index … within day (the leaves' positions in the day's Merkle
-- tree). A row per entry cost MySQL more than the batch UPDATE itself
-- (docs/benchmarks.md, The evidence ledger). bodies are the entries'
-- canonical JSON bodies joined by a newline (canonical JSON has none of
-- its own), leaves their leaf hashes (SHA-256(0x00 || body)), 32 bytes
-- each, uids their recipients' uids, 4 bytes big-endian each (empty for
-- a kind of the whole message: version, recall). Retention empties a
-- body and keeps its leaf, so the day's root still verifies.
CREATE TABLE ledger_blocks (
    corp_id     VARCHAR(64)  CHARACTER SET ascii NOT NULL,
    first_seq   BIGINT UNSIGNED NOT NULL,
    count       INT UNSIGNED NOT NULL,
    day         DATE NOT NULL,
    first_index BIGINT UNSIGNED NOT NULL,
    kind        VARCHAR(16)  CHARACTER SET ascii NOT NULL,
    msgid       VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    uids        MEDIUMBLOB NOT NULL,
    bodies      LONGBLOB NOT NULL,
    leaves      MEDIUMBLOB NOT NULL,
    PRIMARY KEY (corp_id, first_seq),
    UNIQUE KEY ledger_day (corp_id, day, first_index),
    KEY ledger_message (corp_id, msgid, kind)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE ledger_blocks;
DROP TABLE ledger_heads;
