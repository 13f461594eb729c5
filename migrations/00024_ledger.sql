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
    PRIMARY KEY (corp_id)
) ENGINE=InnoDB;

-- ledger_entries: seq 1, 2, … per corp without gaps; day_index 0, 1, …
-- within a day (the leaf's position in the day's Merkle tree). body is
-- the canonical JSON the leaf hash covers (SHA-256(0x00 || body)); it is
-- NULL once anonymised (retention), leaf_hash stays so the day's root
-- still verifies. msgid, uid and userid repeat the body's for look-ups;
-- uid is NULL for an entry of the whole message (a version, a recall).
CREATE TABLE ledger_entries (
    corp_id   VARCHAR(64)  CHARACTER SET ascii NOT NULL,
    seq       BIGINT UNSIGNED NOT NULL,
    day       DATE NOT NULL,
    day_index BIGINT UNSIGNED NOT NULL,
    kind      VARCHAR(16)  CHARACTER SET ascii NOT NULL,
    msgid     VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    uid       INT UNSIGNED NULL,
    userid    VARCHAR(64)  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
    body      BLOB NULL,
    leaf_hash BINARY(32) NOT NULL,
    PRIMARY KEY (corp_id, seq),
    UNIQUE KEY ledger_day (corp_id, day, day_index),
    KEY ledger_person (corp_id, msgid, uid, kind)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE ledger_entries;
DROP TABLE ledger_heads;
