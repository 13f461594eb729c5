-- +goose Up
-- Dense uids per corp: uid_seq hands out the next free uid (see idmap).
CREATE TABLE uid_seq (
    corp_id  VARCHAR(64) CHARACTER SET ascii NOT NULL,
    next_uid INT UNSIGNED NOT NULL,
    PRIMARY KEY (corp_id)
) ENGINE=InnoDB;


CREATE TABLE users (
    corp_id     VARCHAR(64) CHARACTER SET ascii NOT NULL,
    uid         INT UNSIGNED NOT NULL,
    userid      VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    name        VARCHAR(255) CHARACTER SET utf8mb4 NOT NULL DEFAULT '',
    -- status: 1 active, 2 left (deleted in WeCom; the uid is never reused).
    status      TINYINT UNSIGNED NOT NULL DEFAULT 1,
    -- departments: comma-separated department ids as WeCom lists them.
    departments VARCHAR(1024) CHARACTER SET ascii NOT NULL DEFAULT '',
    updated_at  TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
    PRIMARY KEY (corp_id, uid),
    UNIQUE KEY users_userid (corp_id, userid)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;


CREATE TABLE departments (
    corp_id    VARCHAR(64) CHARACTER SET ascii NOT NULL,
    dept_id    BIGINT UNSIGNED NOT NULL,
    parent_id  BIGINT UNSIGNED NOT NULL DEFAULT 0,
    name       VARCHAR(255) CHARACTER SET utf8mb4 NOT NULL DEFAULT '',
    sort_order BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (corp_id, dept_id),
    KEY departments_parent (corp_id, parent_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE user_departments (
    corp_id VARCHAR(64) CHARACTER SET ascii NOT NULL,
    dept_id BIGINT UNSIGNED NOT NULL,
    uid     INT UNSIGNED NOT NULL,
    PRIMARY KEY (corp_id, dept_id, uid),
    KEY user_departments_uid (corp_id, uid)
) ENGINE=InnoDB;

-- messages: one row per tracked message; msgid is the template card's task_id.
CREATE TABLE messages (
    corp_id         VARCHAR(64) CHARACTER SET ascii NOT NULL,
    msgid           VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    app             VARCHAR(64) CHARACTER SET ascii NOT NULL,
    agent_id        BIGINT NOT NULL,
    title           VARCHAR(512) CHARACTER SET utf8mb4 NOT NULL DEFAULT '',
    sent_at         DATETIME(3) NOT NULL,
    recipient_count INT UNSIGNED NOT NULL,
    -- audience_hash: sha256 of the canonical audience, to tell an idempotent
    -- re-registration from a conflicting one.
    audience_hash   CHAR(64) CHARACTER SET ascii NOT NULL,
    -- state: 0 registering (recipient rows being written), 1 active.
    state           TINYINT UNSIGNED NOT NULL DEFAULT 0,
    created_at      TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (corp_id, msgid),
    KEY messages_sent (corp_id, sent_at),
    KEY messages_app_sent (app, sent_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- message_read_record: one row per recipient, written at registration with
-- is_read = 0 and flipped by flushd in batches of up to 5000 uids.
CREATE TABLE message_read_record (
    corp_id   VARCHAR(64) CHARACTER SET ascii NOT NULL,
    msgid     VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    uid       INT UNSIGNED NOT NULL,
    is_read   TINYINT UNSIGNED NOT NULL DEFAULT 0,
    read_time DATETIME NULL,
    -- source: 0 none, 1 template card button, 2 enter_agent, 3 tracked link, 4 reconcile.
    source    TINYINT UNSIGNED NOT NULL DEFAULT 0,
    PRIMARY KEY (corp_id, msgid, uid),
    -- read rate and time-to-read per message (docs/analytics.md).
    KEY mrr_read (corp_id, msgid, is_read, read_time)
) ENGINE=InnoDB;

-- read_orphans: deltas flushd received for a recipient row that does not
-- exist (yet). Kept, counted and applied when the row appears (see flushd).
CREATE TABLE read_orphans (
    corp_id     VARCHAR(64) CHARACTER SET ascii NOT NULL,
    msgid       VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    uid         INT UNSIGNED NOT NULL,
    read_time   DATETIME NOT NULL,
    source      TINYINT UNSIGNED NOT NULL,
    received_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (corp_id, msgid, uid)
) ENGINE=InnoDB;

-- message_sends: per-user outcome of yidu's own message/send calls.
CREATE TABLE message_sends (
    corp_id   VARCHAR(64) CHARACTER SET ascii NOT NULL,
    msgid     VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    kind      VARCHAR(16) CHARACTER SET ascii NOT NULL,
    batch     INT UNSIGNED NOT NULL,
    status    VARCHAR(16) CHARACTER SET ascii NOT NULL,
    errcode   INT NOT NULL DEFAULT 0,
    invalid   TEXT CHARACTER SET utf8mb4 NULL,
    sent_at   TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (corp_id, msgid, kind, batch, sent_at)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE message_sends;
DROP TABLE read_orphans;
DROP TABLE message_read_record;
DROP TABLE messages;
DROP TABLE user_departments;
DROP TABLE departments;
DROP TABLE users;
DROP TABLE uid_seq;
