package process

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/evidence"
	"github.com/yidu-io/yidu/flushd"
	"github.com/yidu-io/yidu/ledger"
)

// newEvidence builds the evidence service over MySQL, the notices'
// versions, the ledger (nil: the records say 未接入账本), the reading
// page's signals and the log's key (cfg: it signs the packs' manifests).
func newEvidence(db *sql.DB, versions evidence.Versions, l *ledger.Ledger, cfg config.Ledger, log *slog.Logger) (*evidence.Service, error) {
	opts := evidence.Options{PageEvents: pageEvents{db}, Logger: log}
	skey, vkey, err := LedgerKey(cfg)
	if err != nil {
		return nil, err
	}
	if skey != "" {
		if opts.Signer, _, err = ledger.ParseSigningKey(skey); err != nil {
			return nil, err
		}
		opts.VerifierKey = vkey
	}
	if l != nil {
		opts.Ledger = evidenceLedger{l}
	}
	return evidence.New(db, versions, opts)
}

// evidenceLedger adapts *ledger.Ledger to evidence.Ledger.
type evidenceLedger struct{ l *ledger.Ledger }

func (a evidenceLedger) EntriesFor(ctx context.Context, corp, msgid, userid string) ([]evidence.LedgerEntry, error) {
	es, err := a.l.EntriesFor(ctx, corp, msgid, userid)
	if err != nil {
		return nil, err
	}
	out := make([]evidence.LedgerEntry, 0, len(es))
	for _, e := range es {
		out = append(out, evidence.LedgerEntry{Seq: int64(e.Seq), Day: e.Day, Index: int64(e.Index), Kind: string(e.Kind), LeafHash: e.LeafHash, Body: e.Body})
	}
	return out, nil
}

func (a evidenceLedger) Prove(ctx context.Context, corp string, seq int64) (evidence.Proof, error) {
	if seq <= 0 {
		return evidence.Proof{}, fmt.Errorf("evidence: ledger entry %d: no such entry", seq)
	}
	p, err := a.l.Prove(ctx, corp, uint64(seq))
	if err != nil {
		return evidence.Proof{}, err
	}
	out := evidence.Proof{Index: int64(p.Index), TreeSize: int64(p.TreeSize), Root: p.Root, Path: make([][32]byte, len(p.Path)), Checkpoint: p.Checkpoint}
	for i, h := range p.Path {
		out.Path[i] = h
	}
	return out, nil
}

// Checkpoint takes a checkpoint of corp's log (when it grew) and returns
// the newest as signed; "" when corp has no entries yet.
func (a evidenceLedger) Checkpoint(ctx context.Context, corp string) (string, error) {
	c, err := a.l.Checkpoint(ctx, corp)
	if errors.Is(err, ledger.ErrNotFound) {
		return "", nil
	}
	return c.Note, err
}

// DayStamp is the day checkpoint with a TSA token that covers entry seq
// (ledger.StampedCheckpoint), the TSA's time in its token, and its
// consistency proof to the checkpoint of size to (the record's); none
// when that checkpoint is older than the day's (a day closed while the
// record was made).
func (a evidenceLedger) DayStamp(ctx context.Context, corp string, seq, to int64) (evidence.DayStamp, bool, error) {
	if seq <= 0 || to < seq {
		return evidence.DayStamp{}, false, nil
	}
	c, ok, err := a.l.StampedCheckpoint(ctx, corp, uint64(seq))
	if err != nil || !ok || c.Size > uint64(to) {
		return evidence.DayStamp{}, false, err
	}
	ts, err := ledger.ParseTimestamp(c.Timestamp)
	if err != nil {
		return evidence.DayStamp{}, false, fmt.Errorf("evidence: day checkpoint %d of %s: %w", c.Size, corp, err)
	}
	cons, err := a.l.Consistency(ctx, corp, c.Size, uint64(to))
	if err != nil {
		return evidence.DayStamp{}, false, fmt.Errorf("evidence: day checkpoint %d of %s: %w", c.Size, corp, err)
	}
	doc := &evidence.ConsistencyDoc{TreeSize: to, Path: make([]string, 0, len(cons.Path))}
	for _, h := range cons.Path {
		doc.Path = append(doc.Path, h.String())
	}
	return evidence.DayStamp{Day: c.Day, Size: int64(c.Size), Root: c.Root.String(), Time: ts.Time, Token: c.Timestamp, Note: c.Note,
		Consistency: doc}, true, nil
}

// pageEvents reads the reading page's signals through flushd, which
// writes them (page_signals): each signal on each version, first time,
// IP and User-Agent.
type pageEvents struct{ db *sql.DB }

func (p pageEvents) PageEvents(ctx context.Context, corp, msgid string, uid uint32) ([]evidence.Signal, error) {
	events, err := flushd.PageSignals(ctx, p.db, corp, msgid, uid)
	if err != nil {
		return nil, fmt.Errorf("evidence: %w", err)
	}
	out := make([]evidence.Signal, 0, len(events))
	for _, e := range events {
		out = append(out, evidence.Signal{Kind: e.Signal.String(), Version: e.Version, At: e.At, Source: "page", ClientIP: e.ClientIP, UserAgent: e.UserAgent})
	}
	return out, nil
}

// A scoped caller's record shows only the departments of their scope.
var _ evidence.DepartmentScope = access.View{}
