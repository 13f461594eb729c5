-- +goose Up
-- Issue 50: a receipt turn reads back the rows it just claimed by their
-- owner (tracker's claimedReceipts). Without an index on owner that read
-- scanned every queued receipt (the state index), each second, on every
-- replica: after a storm of 100,000 acknowledgements, 100,000 rows a
-- second while the queue drained.
ALTER TABLE ack_receipts ADD KEY ack_receipts_owner (owner, state);

-- +goose Down
ALTER TABLE ack_receipts DROP KEY ack_receipts_owner;
