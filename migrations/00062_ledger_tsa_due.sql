-- +goose Up
-- Issue 48: a day checkpoint whose RFC 3161 token could not be obtained
-- (the TSA down, a timeout, a bad or replayed reply) is asked again.
-- tsa_due: when the token of this day checkpoint is next asked for; NULL
-- once it is stored, and for checkpoints that close no day. A replica
-- claims a try by moving tsa_due past its backoff with a conditional
-- UPDATE (only one replica's matches), so two replicas never both ask.
-- tsa_tries counts the tries, for the backoff (1 minute, doubling, at
-- most an hour).
ALTER TABLE ledger_checkpoints
    ADD COLUMN tsa_due DATETIME(3) NULL,
    ADD COLUMN tsa_tries INT UNSIGNED NOT NULL DEFAULT 0,
    ADD KEY ledger_checkpoint_tsa_due (tsa_due);

UPDATE ledger_checkpoints SET tsa_due = created_at WHERE day IS NOT NULL AND tsa_token IS NULL;

-- +goose Down
ALTER TABLE ledger_checkpoints DROP KEY ledger_checkpoint_tsa_due, DROP COLUMN tsa_tries, DROP COLUMN tsa_due;
