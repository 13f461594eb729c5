-- +goose Up
-- Issue 12, parts 2 and 5: the card's body and url, recalling a notice,
-- and what WeCom answered for every send batch.
--
-- messages.body is the card's sub_title_text (at most 160 characters,
-- message/send doc path 90236); url the document the card opens (at most
-- 2048 bytes, a tracked link's target). recalled_at is set once every
-- batch was recalled (message/recall, doc path 96460); read_at_recall is
-- the read count frozen then, which the dashboard shows from then on.
ALTER TABLE messages
    ADD COLUMN body           VARCHAR(160) CHARACTER SET utf8mb4 NOT NULL DEFAULT '' AFTER title,
    ADD COLUMN url            VARCHAR(2048) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '' AFTER body,
    ADD COLUMN recalled_at    DATETIME(3) NULL,
    ADD COLUMN read_at_recall INT UNSIGNED NULL;

-- message_sends, one row per attempt of a batch: users addressed, members
-- left out (missing: no UserID; bad_userids: a UserID WeCom refuses),
-- resent (the one resend under WeCom's duplicate check after an unknown
-- outcome), WeCom's msgid (only good for message/recall) and
-- response_code (message/update_template_card, doc path 94945), and the
-- recall of the batch (recalled_at, or WeCom's recall_errcode).
ALTER TABLE message_sends
    ADD COLUMN users          INT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN missing        INT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN bad_userids    INT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN resent         TINYINT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN wecom_msgid    VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NULL,
    ADD COLUMN response_code  VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NULL,
    ADD COLUMN recalled_at    DATETIME(3) NULL,
    ADD COLUMN recall_errcode INT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE message_sends
    DROP COLUMN recall_errcode,
    DROP COLUMN recalled_at,
    DROP COLUMN response_code,
    DROP COLUMN wecom_msgid,
    DROP COLUMN resent,
    DROP COLUMN bad_userids,
    DROP COLUMN missing,
    DROP COLUMN users;

ALTER TABLE messages
    DROP COLUMN read_at_recall,
    DROP COLUMN recalled_at,
    DROP COLUMN url,
    DROP COLUMN body;
