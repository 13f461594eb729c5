-- +goose Up
-- Issue 30: follow-up that runs itself (package campaign).

-- follow_ups: a notice's follow-up policy (yidu.Policy as JSON, as posted)
-- and where it stands. stopped_reason is set once it ends: 'deadline',
-- 'everyone_read', 'recalled', 'done' (every round fired), 'removed'.
CREATE TABLE follow_ups (
    corp_id        VARCHAR(64) CHARACTER SET ascii NOT NULL,
    msgid          VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    policy         TEXT CHARACTER SET utf8mb4 NOT NULL,
    stopped_reason VARCHAR(32) CHARACTER SET ascii NULL,
    updated_by     VARCHAR(128) CHARACTER SET utf8mb4 NOT NULL DEFAULT '',
    updated_at     DATETIME(3) NOT NULL,
    PRIMARY KEY (corp_id, msgid)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- follow_up_rounds: one row per round of a notice, written when it becomes
-- due. state: pending | sending | sent | cancelled | skipped (nobody left
-- to remind, or the deadline passed) | failed. A replica works on a round
-- only after claiming it with campaign.Lease (owner, lease_until,
-- attempts: the same claim as a scheduled send), so a round is sent by
-- one replica at a time, and a 'sending' row whose lease ran out is
-- resumed by another. sent_to counts the people reminded; spread_until is
-- when a round larger than the app's remaining daily quota will have
-- reached everyone; escalated says the leaders' digests of this round are
-- done; cancelled_at a cancel asked while sending (the round stops after
-- its current batch).
CREATE TABLE follow_up_rounds (
    corp_id      VARCHAR(64) CHARACTER SET ascii NOT NULL,
    msgid        VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    round        SMALLINT UNSIGNED NOT NULL,
    state        VARCHAR(16) CHARACTER SET ascii NOT NULL,
    due_at       DATETIME(3) NOT NULL,
    owner        VARCHAR(128) CHARACTER SET utf8mb4 NULL,
    lease_until  DATETIME(3) NULL,
    attempts     INT UNSIGNED NOT NULL DEFAULT 0,
    started_at   DATETIME(3) NULL,
    finished_at  DATETIME(3) NULL,
    sent_to      INT UNSIGNED NOT NULL DEFAULT 0,
    spread_until DATETIME(3) NULL,
    escalated    TINYINT UNSIGNED NOT NULL DEFAULT 0,
    cancelled_at DATETIME(3) NULL,
    PRIMARY KEY (corp_id, msgid, round),
    KEY follow_up_rounds_due (state, due_at)
) ENGINE=InnoDB;

-- follow_up_batches: each batch of a round (up to 1,000 people, WeCom's
-- touser limit, doc path 90236), recorded before it is sent and marked
-- after: a round resumed after a crash sends the batches still 'pending'
-- with the same people, and never a 'sent' one again. kind: reminder |
-- digest. uids is the batch's people as a roaring bitmap.
CREATE TABLE follow_up_batches (
    corp_id    VARCHAR(64) CHARACTER SET ascii NOT NULL,
    msgid      VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    round      SMALLINT UNSIGNED NOT NULL,
    kind       VARCHAR(16) CHARACTER SET ascii NOT NULL,
    batch      INT UNSIGNED NOT NULL,
    state      VARCHAR(16) CHARACTER SET ascii NOT NULL,
    uids       MEDIUMBLOB NOT NULL,
    people     INT UNSIGNED NOT NULL,
    errcode    INT NOT NULL DEFAULT 0,
    created_at DATETIME(3) NOT NULL,
    sent_at    DATETIME(3) NULL,
    PRIMARY KEY (corp_id, msgid, round, kind, batch)
) ENGINE=InnoDB;

-- reminder_log: one row per person per round, reminder or leader's digest
-- (kind), written with its batch before the send (outcome 'pending') and
-- set after: 'sent', 'invalid' (WeCom's invaliduser), 'failed'. The key
-- makes a second reminder of one person in one round impossible.
-- reminded_at is in whole seconds, as message_read_record.read_time, so a
-- read in the same second counts as after it.
CREATE TABLE reminder_log (
    corp_id     VARCHAR(64) CHARACTER SET ascii NOT NULL,
    msgid       VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    round       SMALLINT UNSIGNED NOT NULL,
    kind        VARCHAR(16) CHARACTER SET ascii NOT NULL,
    uid         INT UNSIGNED NOT NULL,
    userid      VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    batch       INT UNSIGNED NOT NULL,
    reminded_at DATETIME NOT NULL,
    outcome     VARCHAR(16) CHARACTER SET ascii NOT NULL,
    PRIMARY KEY (corp_id, msgid, round, kind, uid)
) ENGINE=InnoDB;

-- reminder_effect: what each round achieved, one row per notice and round
-- with reminders sent. sent_to counts the people the round reached
-- (outcome 'sent'); read_within_1h and read_within_24h those of them who
-- read the notice at most 1 h and 24 h after their reminder (a read in
-- the same second included); still_unread those who have not read.
CREATE VIEW reminder_effect AS
SELECT l.corp_id, l.msgid, m.title, l.round,
       MIN(l.reminded_at) AS reminded_at,
       COUNT(*) AS sent_to,
       SUM(CASE WHEN r.is_read = 1 AND r.read_time >= l.reminded_at
                 AND r.read_time <= l.reminded_at + INTERVAL 1 HOUR THEN 1 ELSE 0 END) AS read_within_1h,
       SUM(CASE WHEN r.is_read = 1 AND r.read_time >= l.reminded_at
                 AND r.read_time <= l.reminded_at + INTERVAL 24 HOUR THEN 1 ELSE 0 END) AS read_within_24h,
       SUM(CASE WHEN r.is_read = 1 THEN 0 ELSE 1 END) AS still_unread
FROM reminder_log l
JOIN messages m ON m.corp_id = l.corp_id AND m.msgid = l.msgid
LEFT JOIN message_read_record r ON r.corp_id = l.corp_id AND r.msgid = l.msgid AND r.uid = l.uid
WHERE l.kind = 'reminder' AND l.outcome = 'sent'
GROUP BY l.corp_id, l.msgid, m.title, l.round;

-- +goose Down
DROP VIEW reminder_effect;
DROP TABLE reminder_log;
DROP TABLE follow_up_batches;
DROP TABLE follow_up_rounds;
DROP TABLE follow_ups;
