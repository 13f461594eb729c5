-- +goose Up
-- Issue 40: retention per notice. retention is the notice's own
-- ("3y", "18m", "90d"; yidu.ParseRetention), NULL for its app's default
-- (apps[].retention). anonymised_at is when `yidu archive purge` removed
-- the notice's personal data after it: the per-person rows go (the
-- summary is kept in message_summaries), WeCom's invaliduser lists and
-- the audit rows' IPs, User-Agents and details are blanked; the notice,
-- its versions, its send batches and the ledger's hashes stay.
ALTER TABLE messages
    ADD COLUMN retention     VARCHAR(8) CHARACTER SET ascii NULL,
    ADD COLUMN anonymised_at DATETIME(3) NULL;

-- +goose Down
ALTER TABLE messages
    DROP COLUMN anonymised_at,
    DROP COLUMN retention;
