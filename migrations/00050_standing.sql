-- +goose Up
-- Issue 51, standing notices: a notice whose audience keeps growing with
-- the directory, and is asked again on a cycle.
--
-- standing_notices: the rule (campaign's). audience is the audience as it
-- was asked (JSON of yidu.Audience: departments with their subtrees,
-- tags, all), not its expansion; spec the yidu.Standing (JSON). The row
-- is a claim too (owner, lease_until: one replica enrols at a time);
-- checked_version is the directory version (directory_versions) whose
-- members were last compared with the recipients; cycle the current
-- re-acknowledgement cycle, begun at cycle_started_at.
CREATE TABLE standing_notices (
    corp_id          VARCHAR(64)  CHARACTER SET ascii NOT NULL,
    msgid            VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    app              VARCHAR(64)  CHARACTER SET ascii NOT NULL,
    audience         MEDIUMTEXT   CHARACTER SET utf8mb4 NOT NULL,
    spec             TEXT         CHARACTER SET utf8mb4 NOT NULL,
    until_at         DATETIME(3)  NULL,
    created_by       VARCHAR(128) CHARACTER SET utf8mb4 NOT NULL DEFAULT '',
    created_at       DATETIME(3)  NOT NULL,
    ended_by         VARCHAR(128) CHARACTER SET utf8mb4 NULL,
    checked_version  BIGINT UNSIGNED NOT NULL DEFAULT 0,
    cycle            INT UNSIGNED NOT NULL DEFAULT 1,
    cycle_started_at DATETIME(3)  NULL,
    owner            VARCHAR(128) CHARACTER SET utf8mb4 NULL,
    lease_until      DATETIME(3)  NULL,
    PRIMARY KEY (corp_id, msgid)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- standing_enrolments: one row per member enrolled in a standing notice
-- after its first send (the tracker's; the primary key makes the
-- enrolment once per member per notice, whatever the replicas). batch
-- is the message_sends batch (kind send, numbered from 1,000,000) that
-- carries their card; sent_at is set, with its ledger entry, when WeCom
-- answered it; NULL: found but not sent yet (sent after a restart).
CREATE TABLE standing_enrolments (
    corp_id   VARCHAR(64)  CHARACTER SET ascii NOT NULL,
    msgid     VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    uid       INT UNSIGNED NOT NULL,
    userid    VARCHAR(64)  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    version   INT UNSIGNED NOT NULL DEFAULT 0,
    batch     INT UNSIGNED NOT NULL,
    joined_at DATETIME(3)  NOT NULL,
    deadline  DATETIME(3)  NOT NULL,
    sent_at   DATETIME(3)  NULL,
    status    VARCHAR(16)  CHARACTER SET ascii NOT NULL DEFAULT 'pending',
    PRIMARY KEY (corp_id, msgid, uid),
    KEY standing_enrolments_batch (corp_id, msgid, batch),
    KEY standing_enrolments_joined (corp_id, msgid, joined_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- standing_rounds: a joiner's own reminder rounds, counted from their
-- own card (round 1 a day after it under a "1d" policy). The row is the
-- claim (state sending, lease_until) and the record (sent, skipped).
CREATE TABLE standing_rounds (
    corp_id     VARCHAR(64)  CHARACTER SET ascii NOT NULL,
    msgid       VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    uid         INT UNSIGNED NOT NULL,
    round       SMALLINT UNSIGNED NOT NULL,
    state       VARCHAR(16)  CHARACTER SET ascii NOT NULL,
    due_at      DATETIME(3)  NOT NULL,
    owner       VARCHAR(128) CHARACTER SET utf8mb4 NULL,
    lease_until DATETIME(3)  NULL,
    sent_at     DATETIME(3)  NULL,
    PRIMARY KEY (corp_id, msgid, uid, round)
) ENGINE=InnoDB;

-- standing_cycles: each re-acknowledgement cycle of a standing notice:
-- when it began, the version it asked for, and, once it ended, its
-- counts then (by_cycle keeps both cycles after the reset).
CREATE TABLE standing_cycles (
    corp_id    VARCHAR(64)  CHARACTER SET ascii NOT NULL,
    msgid      VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    cycle      INT UNSIGNED NOT NULL,
    version    INT UNSIGNED NOT NULL DEFAULT 0,
    started_at DATETIME(3)  NOT NULL,
    ended_at   DATETIME(3)  NULL,
    recipients INT UNSIGNED NOT NULL DEFAULT 0,
    acknowledged INT UNSIGNED NOT NULL DEFAULT 0,
    PRIMARY KEY (corp_id, msgid, cycle)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE standing_cycles;
DROP TABLE standing_rounds;
DROP TABLE standing_enrolments;
DROP TABLE standing_notices;
