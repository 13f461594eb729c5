-- +goose Up
-- Issue 41: approval before sending. A notice of an app with
-- apps[].approval that reaches more than `over` people, 全员, or asks
-- for acknowledgement needs another person's approval of its version
-- (campaign's ApprovalHash: content, audience, schedule, policy).
--
-- campaigns.approval: '' (none needed) | pending (待审批) | approved
-- (已批准) | rejected (已驳回); approval_hash the version asked for or
-- approved; approval_now 1 when the author asked to send it once
-- approved. The Runner claims a notice only when approval is '' or
-- approved, and holds a due one that is not (待审批, never sent).
ALTER TABLE campaigns
  ADD COLUMN approval      VARCHAR(16) CHARACTER SET ascii NOT NULL DEFAULT '',
  ADD COLUMN approval_hash CHAR(64)    CHARACTER SET ascii NOT NULL DEFAULT '',
  ADD COLUMN approval_now  TINYINT(1)  NOT NULL DEFAULT 0;

-- notice_approvals: every step of every approval, one row each: who
-- (actor), when (at), which version (version_hash), what (step:
-- requested | approved | rejected | held), and the reason of a
-- rejection. The key makes a decision on a version happen once: a press
-- replayed, or pressed on two replicas, inserts nothing the second time.
CREATE TABLE notice_approvals (
  id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  corp_id      VARCHAR(64)  CHARACTER SET ascii NOT NULL,
  msgid        VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  version_hash CHAR(64)     CHARACTER SET ascii NOT NULL,
  step         VARCHAR(16)  CHARACTER SET ascii NOT NULL,
  actor        VARCHAR(128) CHARACTER SET utf8mb4 NOT NULL,
  at           DATETIME(3)  NOT NULL,
  reason       VARCHAR(512) CHARACTER SET utf8mb4 NOT NULL DEFAULT '',
  PRIMARY KEY (id),
  KEY notice_approvals_notice (corp_id, msgid, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE notice_approvals;
ALTER TABLE campaigns DROP COLUMN approval, DROP COLUMN approval_hash, DROP COLUMN approval_now;
