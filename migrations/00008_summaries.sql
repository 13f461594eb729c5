-- +goose Up
-- message_summaries: what `yidu archive purge` keeps of a notice whose
-- detail it deletes (docs/analytics.md, "Retention"): message_summary's
-- row as it was just before the purge, with the per-signal counts, one row
-- per notice. Written once (INSERT IGNORE), so a purge interrupted and run
-- again never replaces a summary with one of a half-deleted notice.
CREATE TABLE message_summaries (
    corp_id        VARCHAR(64) CHARACTER SET ascii NOT NULL,
    msgid          VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    app            VARCHAR(64) CHARACTER SET ascii NOT NULL,
    title          VARCHAR(512) CHARACTER SET utf8mb4 NOT NULL DEFAULT '',
    sent_at        DATETIME(3) NOT NULL,
    recalled_at    DATETIME(3) NULL,
    read_at_recall INT UNSIGNED NULL,
    recipients     INT UNSIGNED NOT NULL,
    read_count     INT UNSIGNED NOT NULL,
    percent        DECIMAL(4,1) NULL,
    median_seconds DECIMAL(14,1) NULL,
    seconds_to_90  BIGINT NULL,
    button         INT UNSIGNED NOT NULL,
    link           INT UNSIGNED NOT NULL,
    enter_agent    INT UNSIGNED NOT NULL,
    purged_at      TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (corp_id, msgid),
    KEY message_summaries_sent (corp_id, sent_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- +goose Down
DROP TABLE message_summaries;
