-- +goose Up
-- The directory's tags (标签) and department leaders, synced with the
-- departments and members (idmap.Syncer, in the transaction that writes
-- user_departments).
--
-- tags: tag/list (doc path 90216). tag_users and tag_departments: tag/get
-- (doc path 90213), which returns only the members inside the app's
-- visible range (可见范围). A tag's audience is its users plus every
-- active member of its departments' subtrees.
CREATE TABLE tags (
    corp_id VARCHAR(64) CHARACTER SET ascii NOT NULL,
    tag_id  BIGINT UNSIGNED NOT NULL,
    name    VARCHAR(255) CHARACTER SET utf8mb4 NOT NULL DEFAULT '',
    PRIMARY KEY (corp_id, tag_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE tag_users (
    corp_id VARCHAR(64) CHARACTER SET ascii NOT NULL,
    tag_id  BIGINT UNSIGNED NOT NULL,
    uid     INT UNSIGNED NOT NULL,
    PRIMARY KEY (corp_id, tag_id, uid),
    KEY tag_users_uid (corp_id, uid)
) ENGINE=InnoDB;

CREATE TABLE tag_departments (
    corp_id VARCHAR(64) CHARACTER SET ascii NOT NULL,
    tag_id  BIGINT UNSIGNED NOT NULL,
    dept_id BIGINT UNSIGNED NOT NULL,
    PRIMARY KEY (corp_id, tag_id, dept_id)
) ENGINE=InnoDB;

-- department_leaders: department/list's department_leader (doc path
-- 90208), UserIDs as WeCom lists them; a department may have none or
-- several. uid is the leader's uid when the directory knows them.
CREATE TABLE department_leaders (
    corp_id VARCHAR(64) CHARACTER SET ascii NOT NULL,
    dept_id BIGINT UNSIGNED NOT NULL,
    uid     INT UNSIGNED NOT NULL,
    PRIMARY KEY (corp_id, dept_id, uid),
    KEY department_leaders_uid (corp_id, uid)
) ENGINE=InnoDB;

-- directory_versions: bumped by every directory write (sync,
-- change_contact), so in-memory indexes (people search, the department
-- tree's counts) know when to rebuild.
CREATE TABLE directory_versions (
    corp_id VARCHAR(64) CHARACTER SET ascii NOT NULL,
    version BIGINT UNSIGNED NOT NULL DEFAULT 0,
    PRIMARY KEY (corp_id)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE directory_versions;
DROP TABLE department_leaders;
DROP TABLE tag_departments;
DROP TABLE tag_users;
DROP TABLE tags;
