-- +goose Up
-- Issue 48: the evidence ledger is one append-only Merkle log per corp
-- (RFC 6962, Certificate Transparency's), not a tree per day. Entry seq N
-- is the log's leaf N-1; the leaves already stored in ledger_blocks are
-- the log as it is, in seq order, so nothing is rehashed: each corp's
-- existing entries are simply the first leaves of its log, and the days
-- sealed before (ledger_roots) stay as they were, checked by verify
-- against their own day trees.
--
-- ledger_checkpoints: each signed statement of a corp's log (C2SP
-- tlog-checkpoint: origin, size, root, as a signed note with the log's
-- Ed25519 key), taken at least every minute while entries arrive and at
-- the end of each Asia/Shanghai day (day set: the checkpoint whose last
-- entry is the day's last, which replaces the day's sealed root).
-- subtrees: the compact range of the log's first size leaves (its
-- perfect subtrees' hashes, 32 bytes each, left to right), from which
-- the next checkpoint hashes only the entries after it. tsa_token: the
-- RFC 3161 timestamp token of a day's checkpoint (DER), over SHA-256 of
-- note.
CREATE TABLE ledger_checkpoints (
    corp_id    VARCHAR(64) CHARACTER SET ascii NOT NULL,
    size       BIGINT UNSIGNED NOT NULL,
    root       BINARY(32) NOT NULL,
    day        DATE NULL,
    note       TEXT CHARACTER SET utf8mb4 NOT NULL,
    created_at DATETIME(3) NOT NULL,
    subtrees   BLOB NOT NULL,
    tsa_token  MEDIUMBLOB NULL,
    PRIMARY KEY (corp_id, size),
    KEY ledger_checkpoint_day (corp_id, day)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE ledger_checkpoints;
