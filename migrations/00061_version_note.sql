-- +goose Up
-- Issue 49, a new version says what changed: notice_versions.change_note
-- is the publisher's note on version N (修改说明: plain text, at most 200
-- characters, no control characters; notice.CheckNote). NULL: none
-- (version 1, and versions published before this column).
ALTER TABLE notice_versions
    ADD COLUMN change_note VARCHAR(200) CHARACTER SET utf8mb4 NULL;

-- +goose Down
ALTER TABLE notice_versions DROP COLUMN change_note;
