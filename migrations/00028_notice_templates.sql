-- +goose Up
-- Issue 41: templates (从模板新建). A template is a notice kept to start
-- others from: its content, attachments (upload ids), audience,
-- follow-up policy and read rule, as the JSON of the template's fields
-- (campaign.Templates). A sender of the app uses them; the app's admins
-- create, change and delete them (deleted_at: gone from the list, kept
-- for the audit). version counts the changes.
CREATE TABLE notice_templates (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  corp_id     VARCHAR(64)  CHARACTER SET ascii NOT NULL,
  app         VARCHAR(64)  CHARACTER SET ascii NOT NULL,
  name        VARCHAR(256) CHARACTER SET utf8mb4 NOT NULL,
  fields      MEDIUMTEXT   CHARACTER SET utf8mb4 NOT NULL,
  version     INT UNSIGNED NOT NULL DEFAULT 1,
  created_by  VARCHAR(128) CHARACTER SET utf8mb4 NOT NULL,
  updated_by  VARCHAR(128) CHARACTER SET utf8mb4 NOT NULL,
  created_at  DATETIME(3)  NOT NULL,
  updated_at  DATETIME(3)  NOT NULL,
  deleted_at  DATETIME(3)  NULL,
  PRIMARY KEY (id),
  KEY notice_templates_app (corp_id, app, deleted_at, updated_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE notice_templates;
