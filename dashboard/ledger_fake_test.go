package dashboard

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/progress"
)

// setAccess wires acc after New, as the scope tests do, into the
// campaign service too.
func (s *Server) setAccess(acc *access.Access) {
	prog, err := progress.New(s.msgs, s.bms, progress.Options{Directory: s.dir, History: s.msgs, Viewer: acc, Now: s.now})
	if err != nil {
		panic(err)
	}
	s.prog = prog
	s.actOpts.Scope, s.actOpts.Readers = acc, prog
	s.actOpts.Audiences = audiences(acc)
	s.acts = campaign.NewService(s.actOpts)
}

// resolveWeCom makes the fixture's sessions of WeCom members resolve
// with acc, as Options.WeCom.Access does.
func (f *fixture) resolveWeCom(tb testing.TB, acc *access.Access) {
	tb.Helper()
	ids, err := access.NewIdentities(access.IdentityOptions{Tokens: f.opts.Tokens, Users: f.opts.Users,
		SessionTTL: f.opts.SessionTTL, Sessions: f.opts.Sessions, WeCom: acc, Now: f.opts.Now})
	if err != nil {
		tb.Fatal(err)
	}
	f.srv.auth = ids
}

// fakeLedger is campaign.Ledger in memory for the HTTP tests (the MySQL
// one is campaign's, tested there and across two processes in
// cmd/internal/process).
type fakeLedger struct {
	mu       sync.Mutex
	held     map[string]bool
	reminded map[string]map[uint32]time.Time
}

var _ campaign.Ledger = (*fakeLedger)(nil)

func newFakeLedger() *fakeLedger {
	return &fakeLedger{held: map[string]bool{}, reminded: map[string]map[uint32]time.Time{}}
}

func (l *fakeLedger) Claim(_ context.Context, corp, msg, _ string) (func(), bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := key(corp, msg)
	if l.held[k] {
		return nil, false, nil
	}
	l.held[k] = true
	return func() {
		l.mu.Lock()
		delete(l.held, k)
		l.mu.Unlock()
	}, true, nil
}

func (l *fakeLedger) Reminded(_ context.Context, corp, msg string, since time.Time) (map[uint32]time.Time, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[uint32]time.Time{}
	for uid, at := range l.reminded[key(corp, msg)] {
		if at.After(since) {
			out[uid] = at
		}
	}
	return out, nil
}

func (l *fakeLedger) Record(_ context.Context, corp, msg string, at time.Time, _, _ string, uids []uint32) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := key(corp, msg)
	if l.reminded[k] == nil {
		l.reminded[k] = map[uint32]time.Time{}
	}
	for _, u := range uids {
		l.reminded[k][u] = at
	}
	return nil
}

func (l *fakeLedger) Unrecord(_ context.Context, corp, msg string, at time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for uid, t := range l.reminded[key(corp, msg)] {
		if t.Equal(at) {
			delete(l.reminded[key(corp, msg)], uid)
		}
	}
	return nil
}

// forget drops who was reminded of a notice.
func (l *fakeLedger) forget(corp, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.reminded, key(corp, msg))
}

// The answers as the tests decode them (package progress owns them).
type (
	progressJSON   = progress.Report
	recipientsJSON = progress.RecipientPage
	recipientJSON  = progress.Recipient
	deptJSON       = progress.Department
)

func curveTotal(c []progress.CurvePoint) int64 { return progress.Report{Curve: c}.CurveTotal() }
