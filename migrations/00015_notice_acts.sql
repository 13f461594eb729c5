-- +goose Up
-- Issue 37 (step 4) and issue 38 (item 3): a person's acts on a sent
-- notice are claimed in MySQL, and a manual reminder is recorded per
-- person (package campaign, Service).
--
-- notice_acts: one row per notice that was reminded or recalled by hand.
-- A replica reminds or recalls a notice only after claiming its row with
-- campaign.Lease (state idle -> sending, owner, lease_until; a 'sending'
-- row whose lease ran out is taken over): of any number of requests on
-- any number of dashboard replicas, one acts at a time, and a recall never
-- races a reminder's batches. act says which act holds it.
CREATE TABLE notice_acts (
    corp_id     VARCHAR(64) CHARACTER SET ascii NOT NULL,
    msgid       VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    state       VARCHAR(16) CHARACTER SET ascii NOT NULL,
    act         VARCHAR(16) CHARACTER SET ascii NOT NULL DEFAULT '',
    owner       VARCHAR(128) CHARACTER SET utf8mb4 NULL,
    lease_until DATETIME(3) NULL,
    attempts    INT UNSIGNED NOT NULL DEFAULT 0,
    PRIMARY KEY (corp_id, msgid)
) ENGINE=InnoDB;

-- manual_reminders: one row per person per manual reminder ("Remind
-- unread"), written by the claim's holder before the cards are sent.
-- reminded_by is the principal whose reminder it was; scope 'all' (a
-- sender or admin: every unread person) or 'led' (a department leader:
-- the unread people of the subtrees it leads). A person reminded within
-- dashboard.remind_interval, by hand or by a follow-up round
-- (reminder_log), is not reminded again by hand: the interval is per
-- person, so a leader's reminder of their people leaves the others to the
-- app's senders (issue 38, item 3).
CREATE TABLE manual_reminders (
    corp_id     VARCHAR(64) CHARACTER SET ascii NOT NULL,
    msgid       VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    uid         INT UNSIGNED NOT NULL,
    reminded_at DATETIME(3) NOT NULL,
    reminded_by VARCHAR(128) CHARACTER SET utf8mb4 NOT NULL,
    scope       VARCHAR(16) CHARACTER SET ascii NOT NULL,
    PRIMARY KEY (corp_id, msgid, uid, reminded_at)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE manual_reminders;
DROP TABLE notice_acts;
