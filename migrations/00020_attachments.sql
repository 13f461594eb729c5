-- +goose Up
-- Issue 39: a notice's attachments (PDF, PNG, JPEG; package attachment).
--
-- The bytes are kept once per SHA-256, whoever uploads them, in chunks of
-- at most 256 KiB (attachment.ChunkSize), so no statement comes near the
-- server's max_allowed_packet. The blob row is written after its last
-- chunk, so a blob row means every chunk is there; chunks without a blob
-- row are an upload cut short, written again by the next upload of the
-- same bytes.
CREATE TABLE attachment_blobs (
    sha256     BINARY(32)  NOT NULL,
    type       VARCHAR(32) CHARACTER SET ascii NOT NULL,
    size       INT UNSIGNED NOT NULL,
    chunks     INT UNSIGNED NOT NULL,
    created_at DATETIME(3) NOT NULL,
    PRIMARY KEY (sha256)
) ENGINE=InnoDB;

CREATE TABLE attachment_chunks (
    sha256 BINARY(32)   NOT NULL,
    seq    INT UNSIGNED NOT NULL,
    data   MEDIUMBLOB   NOT NULL,
    PRIMARY KEY (sha256, seq)
) ENGINE=InnoDB;

-- One row per upload: the id a notice names, the corp it was uploaded
-- for, the name the uploader gave it (type and size are the blob's, sniffed
-- and counted by yidu).
CREATE TABLE attachments (
    id         VARCHAR(32)  CHARACTER SET ascii NOT NULL,
    corp_id    VARCHAR(64)  CHARACTER SET ascii NOT NULL,
    sha256     BINARY(32)   NOT NULL,
    name       VARCHAR(255) CHARACTER SET utf8mb4 NOT NULL,
    type       VARCHAR(32)  CHARACTER SET ascii NOT NULL,
    size       INT UNSIGNED NOT NULL,
    created_by VARCHAR(128) CHARACTER SET utf8mb4 NOT NULL DEFAULT '',
    created_at DATETIME(3)  NOT NULL,
    PRIMARY KEY (id),
    KEY attachments_sha256 (sha256)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE attachments;
DROP TABLE attachment_chunks;
DROP TABLE attachment_blobs;
