-- +goose Up
-- approval_card_retries (issue 46): an approval card WeCom did not take
-- (message/send answered errcode ≠ 0, or no answer came), to be sent
-- again with backoff. A row is claimed with campaign.Lease (state, owner,
-- lease_until, attempts: the same claim as a scheduled send), so one
-- replica sends it; attempts bound the tries. state: pending (next_at
-- is the next try), sending (claimed), sent, failed (gave up), stale
-- (the version it asked for is no longer the one waiting).
CREATE TABLE approval_card_retries (
    corp_id      VARCHAR(64)  CHARACTER SET ascii NOT NULL,
    msgid        VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    task_id      VARCHAR(200) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    version_hash CHAR(64)     CHARACTER SET ascii NOT NULL,
    recipients   BIGINT UNSIGNED NOT NULL,
    state        VARCHAR(16)  CHARACTER SET ascii NOT NULL,
    next_at      DATETIME(3)  NOT NULL,
    owner        VARCHAR(128) CHARACTER SET utf8mb4 NULL,
    lease_until  DATETIME(3)  NULL,
    attempts     INT UNSIGNED NOT NULL DEFAULT 0,
    last_error   VARCHAR(255) CHARACTER SET utf8mb4 NOT NULL DEFAULT '',
    PRIMARY KEY (corp_id, msgid, task_id),
    KEY approval_card_retries_due (state, next_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE approval_card_retries;
