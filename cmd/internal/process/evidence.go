package process

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/evidence"
	"github.com/yidu-io/yidu/ledger"
)

// newEvidence builds the evidence service over MySQL, the notices'
// versions, the ledger (nil: the records say 未接入账本) and the reading
// page's signals.
func newEvidence(db *sql.DB, versions evidence.Versions, l *ledger.Ledger, log *slog.Logger) (*evidence.Service, error) {
	opts := evidence.Options{PageEvents: pageEvents{db}, Logger: log}
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
		out = append(out, evidence.LedgerEntry{Seq: int64(e.Seq), Day: e.Day, Index: int64(e.Index), Kind: string(e.Kind), LeafHash: e.LeafHash})
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
	out := evidence.Proof{Day: p.Day, Index: int64(p.Index), TreeSize: int64(p.TreeSize), Root: p.Root, Path: make([][32]byte, len(p.Path))}
	for i, h := range p.Path {
		out.Path[i] = h
	}
	return out, nil
}

// pageEvents reads the reading page's signals (page_signals, written by
// flushd): each signal on each version, first time, IP and User-Agent.
type pageEvents struct{ db *sql.DB }

func (p pageEvents) PageEvents(ctx context.Context, corp, msgid string, uid uint32) ([]evidence.Signal, error) {
	rows, err := p.db.QueryContext(ctx, `SELECT source, version, seen_at, ip, user_agent FROM page_signals
		WHERE corp_id = ? AND msgid = ? AND uid = ? ORDER BY seen_at, version, source`, corp, msgid, uid)
	if err != nil {
		return nil, fmt.Errorf("evidence: page signals of %s: %w", msgid, err)
	}
	defer rows.Close()
	var out []evidence.Signal
	for rows.Next() {
		var (
			source  uint8
			version int
			at      time.Time
			s       evidence.Signal
		)
		if err := rows.Scan(&source, &version, &at, &s.ClientIP, &s.UserAgent); err != nil {
			return nil, fmt.Errorf("evidence: page signals of %s: %w", msgid, err)
		}
		s.Kind, s.Version, s.At, s.Source = yidu.Signal(source).String(), version, at.UTC(), "page"
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("evidence: page signals of %s: %w", msgid, err)
	}
	return out, nil
}
