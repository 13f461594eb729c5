-- +goose Up
-- Issue 48, the employee keeps a receipt: one row per acknowledgement a
-- member made on the reading page (a page_signals row of signal
-- acknowledged), written by flushd in the transaction that records the
-- acknowledgement and its ledger entry. The tracker's receipt loop claims
-- due rows (owner, lease_until: one replica sends each) and sends the
-- member a WeCom message from the notice's app.
-- seq is the ledger entry of the acknowledgement (0: no ledger);
-- state: queued, sent, refused (a final errcode), off (the app's
-- receipts: false). attempts and next_at pace the retries.
CREATE TABLE ack_receipts (
    corp_id     VARCHAR(64)  CHARACTER SET ascii NOT NULL,
    msgid       VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    uid         INT UNSIGNED NOT NULL,
    version     INT UNSIGNED NOT NULL,
    seq         BIGINT UNSIGNED NOT NULL DEFAULT 0,
    acked_at    DATETIME     NOT NULL,
    state       VARCHAR(16)  CHARACTER SET ascii NOT NULL DEFAULT 'queued',
    attempts    INT UNSIGNED NOT NULL DEFAULT 0,
    next_at     DATETIME(3)  NOT NULL,
    owner       VARCHAR(128) CHARACTER SET utf8mb4 NULL,
    lease_until DATETIME(3)  NULL,
    sent_at     DATETIME(3)  NULL,
    errcode     BIGINT       NULL,
    created_at  DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (corp_id, msgid, uid, version),
    KEY ack_receipts_due (state, next_at),
    KEY ack_receipts_uid (corp_id, uid)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- +goose Down
DROP TABLE ack_receipts;
