-- +goose Up
-- Issue 40 item 2: each day's sealed Merkle tree head per corp (RFC 6962
-- MTH over the day's leaf hashes in day_index order). Written once, after
-- the day ended (Asia/Shanghai), and recorded in audit_events too.
CREATE TABLE ledger_roots (
    corp_id   VARCHAR(64) CHARACTER SET ascii NOT NULL,
    day       DATE NOT NULL,
    size      BIGINT UNSIGNED NOT NULL,
    root      BINARY(32) NOT NULL,
    first_seq BIGINT UNSIGNED NOT NULL,
    sealed_at DATETIME(3) NOT NULL,
    PRIMARY KEY (corp_id, day)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE ledger_roots;
