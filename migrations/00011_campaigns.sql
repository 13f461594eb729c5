-- +goose Up
-- Issue 29, part 2: notices sent from yidu, now or later (package campaign).
--
-- One row per notice before, while and after it is sent. A draft or a
-- scheduled notice is not in messages yet: the audience (the JSON of
-- yidu.Audience as asked, not expanded) is snapshotted by the
-- registration when it is sent, whose msgid is this row's.
--
-- state: draft | scheduled | sending | sent | cancelled | failed | held
-- (yidu.NoticeState). A replica sends a notice only after claiming it
-- (UPDATE ... WHERE state = 'scheduled', or a 'sending' row whose lease ran
-- out): owner names it and lease_until bounds how long it may go silent
-- before another replica resumes the send. started_at is the first claim
-- (the registration's sent_at); sent_late_by the seconds started_at was
-- past send_at; state_reason why a notice failed or is held.
CREATE TABLE campaigns (
    msgid        VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    corp_id      VARCHAR(64) CHARACTER SET ascii NOT NULL,
    app          VARCHAR(64) CHARACTER SET ascii NOT NULL,
    title        VARCHAR(512) CHARACTER SET utf8mb4 NOT NULL,
    body         VARCHAR(160) CHARACTER SET utf8mb4 NOT NULL DEFAULT '',
    url          VARCHAR(2048) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
    audience     MEDIUMTEXT CHARACTER SET utf8mb4 NOT NULL,
    state        VARCHAR(16) CHARACTER SET ascii NOT NULL,
    send_at      DATETIME(3) NULL,
    started_at   DATETIME(3) NULL,
    finished_at  DATETIME(3) NULL,
    sent_late_by INT UNSIGNED NOT NULL DEFAULT 0,
    state_reason VARCHAR(512) CHARACTER SET utf8mb4 NOT NULL DEFAULT '',
    owner        VARCHAR(128) CHARACTER SET utf8mb4 NULL,
    lease_until  DATETIME(3) NULL,
    attempts     INT UNSIGNED NOT NULL DEFAULT 0,
    created_by   VARCHAR(128) CHARACTER SET utf8mb4 NOT NULL DEFAULT '',
    created_at   DATETIME(3) NOT NULL,
    updated_at   DATETIME(3) NOT NULL,
    PRIMARY KEY (msgid),
    KEY campaigns_due (state, send_at),
    KEY campaigns_list (corp_id, state, created_at)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE campaigns;
