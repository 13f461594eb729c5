-- +goose Up
-- A msgid names one message in the whole deployment, not only within its
-- corp: a principal that sees several corps reaches a message by msgid
-- alone, so two corps' messages must never share one (the shadowing of
-- docs/reliability.md, "A corp can shadow another's message"). yidu's own
-- msgids are random; this fails loudly on an archive where two corps
-- registered the same msgid (rename one, then migrate).
CREATE UNIQUE INDEX messages_msgid ON messages (msgid);

-- +goose Down
DROP INDEX messages_msgid ON messages;
