-- +goose Up
-- Issue 40, evidence records: what a send knew that the directory and
-- WeCom's answer forget.
--
-- message_sends.unlicensed: WeCom's unlicenseduser for the batch (the
-- UserIDs without a basic licence, 没有基础接口许可(包含已过期)的userid,
-- message/send doc path 90236), joined by '|' as invalid is. NULL: not
-- recorded (a batch without an answer, or sent before this column).
ALTER TABLE message_sends
    ADD COLUMN unlicensed TEXT CHARACTER SET utf8mb4 NULL;

-- send_departments: each recipient's departments when the notice was
-- first sent, compactly: one row per distinct department set of the
-- notice's recipients (a few hundred for a whole corp, not one per
-- person). depts is the set as the directory held it ("3,17", users.
-- departments), names the departments' names then, as JSON
-- ({"3":"销售部",...}); uids the recipients with that set, a portable
-- roaring bitmap. Written once, in one transaction, before the first
-- batch leaves; a resumed send finds it and keeps it.
CREATE TABLE send_departments (
    corp_id  VARCHAR(64)  CHARACTER SET ascii NOT NULL,
    msgid    VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    set_no   INT UNSIGNED NOT NULL,
    taken_at DATETIME(3) NOT NULL,
    depts    VARCHAR(2048) CHARACTER SET ascii NOT NULL,
    names    MEDIUMTEXT CHARACTER SET utf8mb4 NOT NULL,
    uids     MEDIUMBLOB NOT NULL,
    PRIMARY KEY (corp_id, msgid, set_no)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE send_departments;
ALTER TABLE message_sends DROP COLUMN unlicensed;
