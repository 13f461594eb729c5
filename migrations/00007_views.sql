-- +goose Up
-- Views for analysts (docs/analytics.md, issue 18). Both use only what
-- MariaDB 10.11 and go-mysql-server (the demo's MySQL; both tested) and
-- MySQL 8 (not tested here) document: window functions of the kinds all
-- have (ROW_NUMBER, COUNT and SUM OVER), no PERCENTILE_CONT (MariaDB has
-- it, MySQL 8 does not); the median is computed from row numbers and
-- equals MariaDB's PERCENTILE_CONT(0.5) (migrations.TestViews,
-- cmd/internal/process.TestAnalyticsDoc).

-- read_facts: one row per recipient per notice. departments are the names
-- of the member's departments, ', '-separated in department id order
-- (direct memberships, as user_departments holds them); first_signal names
-- source (NULL while unread); button_at, link_at, enter_at are each
-- signal's first time, counted or not; seconds_to_read is read_time after
-- sent_at (NULL while unread).
CREATE VIEW read_facts AS
SELECT r.corp_id, r.msgid, m.title, m.sent_at,
       r.uid, u.userid, u.name, u.status AS user_status,
       (SELECT GROUP_CONCAT(d.name ORDER BY d.dept_id SEPARATOR ', ')
          FROM user_departments ud
          JOIN departments d ON d.corp_id = ud.corp_id AND d.dept_id = ud.dept_id
         WHERE ud.corp_id = r.corp_id AND ud.uid = r.uid) AS departments,
       r.is_read, r.read_time,
       CASE r.source WHEN 1 THEN 'button' WHEN 2 THEN 'enter_agent' WHEN 3 THEN 'link'
                     WHEN 4 THEN 'reconcile' END AS first_signal,
       r.button_at, r.link_at, r.enter_at,
       CASE WHEN r.is_read = 1 THEN TIMESTAMPDIFF(SECOND, m.sent_at, r.read_time) END AS seconds_to_read
FROM message_read_record r
JOIN messages m ON m.corp_id = r.corp_id AND m.msgid = r.msgid
LEFT JOIN users u ON u.corp_id = r.corp_id AND u.uid = r.uid;

-- message_summary: one row per notice. recipients and read_count are the
-- recipient rows and those read; percent is rounded down to one decimal,
-- as the dashboard's; median_seconds is the median time-to-read of the
-- readers (the mean of the two middle ones for an even count, as
-- PERCENTILE_CONT(0.5)); seconds_to_90 is when the read that brought the
-- count to 90 % of the recipients (rounded up) came, NULL until then. The
-- read count is the current one: a recalled notice's frozen count is
-- read_at_recall. A notice appears once it has recipient rows. Its
-- window functions partition by (corp_id, msgid), so a WHERE on them is
-- pushed into the inner query: one notice's summary reads that notice's
-- rows only (MariaDB 10.11, EXPLAIN on 20,000 rows; MySQL documents the same
-- derived-condition pushdown from 8.0.22, not checked here).
CREATE VIEW message_summary AS
SELECT x.corp_id, x.msgid, x.app, x.title, x.sent_at, x.recalled_at, x.read_at_recall,
       COUNT(*) AS recipients,
       SUM(x.is_read) AS read_count,
       FLOOR(1000 * SUM(x.is_read) / COUNT(*)) / 10 AS percent,
       AVG(CASE WHEN x.is_read = 1 AND x.rn IN (FLOOR((x.readers + 1) / 2), CEIL((x.readers + 1) / 2))
                THEN x.secs END) AS median_seconds,
       MAX(CASE WHEN x.is_read = 1 AND x.rn = CEIL(0.9 * x.total) THEN x.secs END) AS seconds_to_90
FROM (
    SELECT r.corp_id, r.msgid, m.app, m.title, m.sent_at, m.recalled_at, m.read_at_recall, r.is_read,
           TIMESTAMPDIFF(SECOND, m.sent_at, r.read_time) AS secs,
           ROW_NUMBER() OVER (PARTITION BY r.corp_id, r.msgid, r.is_read ORDER BY r.read_time, r.uid) AS rn,
           SUM(r.is_read) OVER (PARTITION BY r.corp_id, r.msgid) AS readers,
           COUNT(*) OVER (PARTITION BY r.corp_id, r.msgid) AS total
    FROM message_read_record r
    JOIN messages m ON m.corp_id = r.corp_id AND m.msgid = r.msgid
) x
GROUP BY x.corp_id, x.msgid, x.app, x.title, x.sent_at, x.recalled_at, x.read_at_recall;

-- +goose Down
DROP VIEW message_summary;
DROP VIEW read_facts;
