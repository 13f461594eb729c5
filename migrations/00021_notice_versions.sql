-- +goose Up
-- Issue 39: the versions of a notice's content (package notice).
--
-- Version 1 is what was sent; it and every later version are immutable
-- (rows are only inserted). A PATCH of a sent notice's content inserts
-- version N+1 in a transaction that locks the notice's rows, so two
-- editors never make the same N. reacknowledge: the change is material
-- (earlier acknowledgements stop counting under an acknowledging rule).
-- read_rule and min_read_seconds are the notice's (yidu.ReadRule), set by
-- version 1 and carried forward. attachments: the JSON array of the
-- attachments as uploaded ({"id","sha256","name","type","size"}), in
-- order. sha256: content.VersionHash (docs/api.md).
CREATE TABLE notice_versions (
    corp_id          VARCHAR(64)  CHARACTER SET ascii NOT NULL,
    msgid            VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    version          INT UNSIGNED NOT NULL,
    title            VARCHAR(512) CHARACTER SET utf8mb4 NOT NULL,
    markdown         MEDIUMTEXT   CHARACTER SET utf8mb4 NOT NULL,
    html             MEDIUMTEXT   CHARACTER SET utf8mb4 NOT NULL,
    attachments      TEXT         CHARACTER SET utf8mb4 NOT NULL,
    sha256           BINARY(32)   NOT NULL,
    reacknowledge    TINYINT(1)   NOT NULL DEFAULT 0,
    read_rule        VARCHAR(16)  CHARACTER SET ascii NOT NULL DEFAULT 'app',
    min_read_seconds INT UNSIGNED NOT NULL DEFAULT 0,
    created_by       VARCHAR(128) CHARACTER SET utf8mb4 NOT NULL DEFAULT '',
    created_at       DATETIME(3)  NOT NULL,
    PRIMARY KEY (corp_id, msgid, version)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE notice_versions;
