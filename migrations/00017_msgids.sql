-- +goose Up
-- Issue 38: one msgid namespace for notices (messages), drafts and
-- scheduled notices (campaigns), checked in one place (package
-- internal/namespace). A msgid is held by the first corp and app that
-- take it; another app's or another corp's registration, draft or
-- schedule of it is refused (409) without saying whose it is. notice
-- marks a msgid taken by a draft or scheduled notice: only that
-- notice's own send registers it, so no one can register it first and
-- make the notice fail when it is due (issue 38, item 1).
CREATE TABLE msgids (
    msgid      VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    corp_id    VARCHAR(64) CHARACTER SET ascii NOT NULL,
    app        VARCHAR(64) CHARACTER SET ascii NOT NULL,
    notice     TINYINT UNSIGNED NOT NULL DEFAULT 0,
    created_at DATETIME(3) NOT NULL,
    PRIMARY KEY (msgid)
) ENGINE=InnoDB;

-- What is held already: every notice of campaign, then every registered
-- message that campaign did not send.
INSERT IGNORE INTO msgids (msgid, corp_id, app, notice, created_at)
    SELECT msgid, corp_id, app, 1, created_at FROM campaigns;
INSERT IGNORE INTO msgids (msgid, corp_id, app, notice, created_at)
    SELECT msgid, corp_id, app, 0, sent_at FROM messages;

-- +goose Down
DROP TABLE msgids;
