-- +goose Up
-- Read signals kept apart (issue 12): the first time each signal was seen
-- per recipient. is_read, read_time and source stay "the first signal that
-- counts as read" for the message's app (apps[].read_signals); button_at,
-- link_at and enter_at record every signal, counted or not, each once: the
-- first card button press, tracked link visit and app entry after the send.
-- NULL: never seen (or seen before this migration; see below).
ALTER TABLE message_read_record
    ADD COLUMN button_at DATETIME NULL,
    ADD COLUMN link_at   DATETIME NULL,
    ADD COLUMN enter_at  DATETIME NULL;

-- A parked read now carries what its delta said: a counted read (read_time,
-- source) and/or the first time of each signal. An orphan of a signal that
-- does not count has no read_time and source 0.
ALTER TABLE read_orphans
    MODIFY COLUMN read_time DATETIME NULL,
    MODIFY COLUMN source    TINYINT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN button_at DATETIME NULL,
    ADD COLUMN link_at   DATETIME NULL,
    ADD COLUMN enter_at  DATETIME NULL;

-- Reads recorded before this migration knew only their first signal: copy
-- it into that signal's column, so per-signal facts (and the Redis signal
-- bitmaps rebuilt from them) include the past. One pass over the read rows.
UPDATE message_read_record
SET button_at = IF(source = 1, read_time, NULL),
    enter_at  = IF(source = 2, read_time, NULL),
    link_at   = IF(source = 3, read_time, NULL)
WHERE is_read = 1 AND source IN (1, 2, 3);

UPDATE read_orphans
SET button_at = IF(source = 1, read_time, NULL),
    enter_at  = IF(source = 2, read_time, NULL),
    link_at   = IF(source = 3, read_time, NULL)
WHERE source IN (1, 2, 3);

-- +goose Down
-- Orphans without a counted read cannot be kept in the old table.
DELETE FROM read_orphans WHERE read_time IS NULL;

ALTER TABLE read_orphans
    DROP COLUMN enter_at,
    DROP COLUMN link_at,
    DROP COLUMN button_at,
    MODIFY COLUMN source    TINYINT UNSIGNED NOT NULL,
    MODIFY COLUMN read_time DATETIME NOT NULL;

ALTER TABLE message_read_record
    DROP COLUMN enter_at,
    DROP COLUMN link_at,
    DROP COLUMN button_at;
