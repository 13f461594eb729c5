-- +goose Up
-- Issue 39: what makes a message read, per message (yidu.ReadRule): the
-- code of the one signal that counts (3 link, 5 read_to_end, 6
-- acknowledged, as message_read_record.source), or 0 for the app's
-- read_signals (every message before this migration). Set at
-- registration; Redis's meta keeps it (field rule) so the receiver's mark
-- decides with it, and is_read, the read bitmap and everything counted
-- from them (progress, departments, exports, rounds, digests, the
-- leaders' view) follow the notice's rule.
ALTER TABLE messages ADD COLUMN read_rule TINYINT UNSIGNED NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE messages DROP COLUMN read_rule;
