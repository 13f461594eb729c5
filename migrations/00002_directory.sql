-- +goose Up
-- WeCom compares UserIDs case-insensitively (user/create, doc path 90195)
-- and lower-cases them in message/send's invaliduser (doc path 90236).
-- userid_key is yidu.UserID.Fold in SQL: an all-ASCII UserID lower-cased
-- (one byte per character), any other as spelt. idmap finds members by it,
-- so "ZhangSan" from a callback is the member the directory lists as
-- "zhangsan". Generated, so every writer of userid (and tests inserting
-- rows by hand) keeps it right.
--
-- Its index is not UNIQUE: a corp may already hold two rows whose UserIDs
-- differ only in case (yidu compared them exactly before), and a UNIQUE
-- key would fail this migration on them. Every writer of users.userid
-- checks the key under the uid_seq row lock (idmap), so no new twin is
-- made; of old twins, lookups take the lowest uid and a sync marks the
-- others left (or reports them, with a partial view).
ALTER TABLE users ADD COLUMN userid_key VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
    AS (IF(CHAR_LENGTH(userid) = LENGTH(userid), LOWER(userid), userid)) STORED;

ALTER TABLE users ADD KEY users_userid_key (corp_id, userid_key);

-- bad_userid: 1 when the UserID breaks WeCom's rule (yidu.UserID.Valid:
-- 1-64 of [0-9A-Za-z_@.-], the first a letter or digit). Such a member is
-- kept, so their reads count, and never addressed by message/send (WeCom
-- would refuse the batch). idmap writes it with every UserID it stores;
-- this backfill mirrors Valid once for the rows already there.
ALTER TABLE users ADD COLUMN bad_userid TINYINT UNSIGNED NOT NULL DEFAULT 0;

UPDATE users SET bad_userid = 1 WHERE userid NOT REGEXP '^[0-9A-Za-z][0-9A-Za-z_@.-]{0,63}$';

-- +goose Down
ALTER TABLE users DROP COLUMN bad_userid;
ALTER TABLE users DROP INDEX users_userid_key;
ALTER TABLE users DROP COLUMN userid_key;
