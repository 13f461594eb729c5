-- +goose Up
-- audit_events: who did what to which notice, for the admins' 操作日志 and
-- PIPL accountability (issue 31 item 4). One row per action; never a
-- token, code, cookie, password or employee list (detail is a short
-- summary such as an export's scope and row count).
CREATE TABLE audit_events (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  at          DATETIME(3)     NOT NULL,
  actor       VARCHAR(128)    NOT NULL,
  actor_kind  VARCHAR(16)     NOT NULL,
  role        VARCHAR(32)     NOT NULL DEFAULT '',
  action      VARCHAR(32)     NOT NULL,
  corp_id     VARCHAR(64)     NOT NULL DEFAULT '',
  app         VARCHAR(64)     NOT NULL DEFAULT '',
  msgid       VARCHAR(64)     NOT NULL DEFAULT '',
  people      BIGINT          NOT NULL DEFAULT 0,
  client_ip   VARCHAR(45)     NOT NULL DEFAULT '',
  user_agent  VARCHAR(255)    NOT NULL DEFAULT '',
  outcome     VARCHAR(16)     NOT NULL,
  detail      VARCHAR(512)    NOT NULL DEFAULT '',
  PRIMARY KEY (id),
  KEY audit_at (at),
  KEY audit_actor (actor, id),
  KEY audit_action (action, id),
  KEY audit_msgid (msgid, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE audit_events;
