-- +goose Up
-- role_grants: the roles yidu.yaml grants (dashboard.users[], tokens[],
-- roles[]), as the last dashboard to start saw them. A dashboard that
-- starts with other grants records each added and removed one as a
-- role_change audit event and replaces these rows (package access,
-- RecordRoleChanges), so a change of roles is attributable like any
-- other action (issue 31 item 4). Department leaders' automatic viewer
-- scopes come from the directory and are not kept here.
CREATE TABLE role_grants (
  grant_key   CHAR(64)      CHARACTER SET ascii NOT NULL,
  holder_kind VARCHAR(16)   CHARACTER SET ascii NOT NULL,
  holder      VARCHAR(128)  NOT NULL,
  corp_id     VARCHAR(64)   CHARACTER SET ascii NOT NULL,
  role        VARCHAR(16)   CHARACTER SET ascii NOT NULL,
  scope       VARCHAR(2048) NOT NULL DEFAULT '',
  since       DATETIME(3)   NOT NULL,
  PRIMARY KEY (grant_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE role_grants;
