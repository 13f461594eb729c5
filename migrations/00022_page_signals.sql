-- +goose Up
-- Issue 39: the reading page's signals, one row per member, signal and
-- notice version, written by flushd from the page's deltas (delta
-- version 4). source is the signal's code as in message_read_record.source
-- (3 link: the page was opened, 5 read_to_end, 6 acknowledged). seen_at is
-- the first time the member gave the signal on that version (UTC, the
-- receiver's clock); ip and user_agent are what the receiver saw with
-- that first event (the evidence of who read which version, when, from
-- where). Rows are only inserted (INSERT IGNORE on the primary key): a
-- replayed delta or a repeated event changes nothing.
CREATE TABLE page_signals (
    corp_id    VARCHAR(64)  CHARACTER SET ascii NOT NULL,
    msgid      VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    uid        INT UNSIGNED NOT NULL,
    source     TINYINT UNSIGNED NOT NULL,
    version    INT UNSIGNED NOT NULL,
    seen_at    DATETIME NOT NULL,
    ip         VARCHAR(64)  CHARACTER SET ascii NOT NULL DEFAULT '',
    user_agent VARCHAR(255) CHARACTER SET utf8mb4 NOT NULL DEFAULT '',
    PRIMARY KEY (corp_id, msgid, uid, source, version),
    KEY page_signals_version (corp_id, msgid, source, version)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE page_signals;
