-- +goose Up
-- Issue 39: a draft, scheduled or held notice keeps its full text until
-- it is sent. campaigns.content is the JSON of yidu.NoticeContent
-- ({"markdown", "attachments": [upload ids], "read_rule",
-- "min_read_seconds"}), NULL for a notice without full text. The Runner
-- publishes it as the notice's version 1 (notice_versions) before its
-- cards leave; it is part of the approval's version hash, so an edit of
-- it after approval needs approval again.
ALTER TABLE campaigns ADD COLUMN content MEDIUMTEXT CHARACTER SET utf8mb4 NULL;

-- +goose Down
ALTER TABLE campaigns DROP COLUMN content;
