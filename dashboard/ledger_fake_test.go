package dashboard

import (
	"cmp"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/progress"
)

// messages is what the services read of the tracker (tracker.Registry,
// or the fixture's archive around it), as cmd wires tracker.Registry
// into progress and campaign.
type messages interface {
	progress.Archive
	progress.History
	campaign.Registrar
	campaign.Messenger
}

// deps are the dashboard's Options and what cmd builds its three
// services from (cmd/internal/process/dashboard.go): the tests build
// them the same way, over the real tracker, bitmaps and directory
// (fixture_test.go, integration_test.go).
type deps struct {
	Options
	Tokens         []access.Token
	Users          []access.User
	SessionTTL     time.Duration
	Sessions       access.SessionStore
	RemindInterval time.Duration
	// Access is whom scoped principals see (nil: WeCom.Access, else an
	// admin of the corp sees everyone, anyone else nobody).
	Access           *access.Access
	Ledger           campaign.ReminderLog
	Approvals        campaign.ApprovalNotifier
	Acknowledgements campaign.Acknowledgements
	// Campaigns, FollowUps, Notices and ReadingPage are campaign's
	// (campaign.New's store, Options.Rounds, Versions and ReadingPage).
	Campaigns   *store.Store
	FollowUps   campaign.Policies
	Notices     campaign.Versions
	ReadingPage func(app, msgID string) string
	// Standings keeps standing notices' rules (campaign's
	// Options.Standing; nil: none are taken).
	Standings campaign.Standings
	// Templates and Files are campaign's (Options.Templates, Files).
	Templates *store.Templates
	Files     campaign.Files
	// Picking is the compose page's directory (nil: dir, if it is one);
	// cmd hands campaign idmap.Mapper through an adapter (pickingDir).
	Picking campaign.Picking
	// Mapper is the fixture's directory, for what an edit builds over
	// it (store.Store's Directory).
	Mapper *idmap.Mapper
}

// services builds the three services over msgs, bms and dir.
func (d deps) services(msgs messages, bms progress.Bitmaps, dir progress.Directory) (*access.Identities, *campaign.Service, *progress.Progress, error) {
	acc := d.Access
	idOpts := access.IdentityOptions{Tokens: d.Tokens, Users: d.Users, SessionTTL: d.SessionTTL, Sessions: d.Sessions, Now: d.Now}
	if d.WeCom != nil {
		idOpts.WeCom = d.WeCom.Access
		acc = cmp.Or(acc, d.WeCom.Access)
	}
	ids, err := access.NewIdentities(idOpts)
	if err != nil {
		return nil, nil, nil, err
	}
	popts := progress.Options{Logger: d.Logger, Directory: dir, History: msgs, Now: d.Now}
	sopts := campaign.Options{Rounds: d.FollowUps, Messenger: msgs, Registrar: msgs,
		Versions: d.Notices, Acknowledgements: d.Acknowledgements, ReadingPage: d.ReadingPage, Notify: d.Approvals,
		Reminders: d.Ledger, RemindInterval: d.RemindInterval, Logger: d.Logger, Now: d.Now, Templates: d.Templates, Files: d.Files, Standing: d.Standings}
	if acc != nil {
		popts.Viewer, sopts.Scope, sopts.Audiences = acc, acc, acc
	}
	if pk, ok := dir.(campaign.Picking); ok {
		sopts.Picking = pk
	}
	if d.Picking != nil {
		sopts.Picking = d.Picking
	}
	prog, err := progress.New(msgs, bms, popts)
	if err != nil {
		return nil, nil, nil, err
	}
	sopts.Readers = prog
	acts := campaign.New(d.Campaigns, sopts)
	return ids, acts, prog, nil
}

// newServer builds the services over msgs, bms and dir, and the Server
// over them.
func newServer(msgs messages, bms progress.Bitmaps, dir progress.Directory, d deps) (*Server, error) {
	ids, acts, prog, err := d.services(msgs, bms, dir)
	if err != nil {
		return nil, err
	}
	return New(ids, acts, prog, d.Options)
}

// setAccess rebuilds the fixture's services with acc, as the scope
// tests do after New.
func (f *fixture) setAccess(tb testing.TB, acc *access.Access) {
	tb.Helper()
	f.rewire(tb, func(d *deps) { d.Access = acc })
}

// rewire applies edit to the fixture's deps after New and rebuilds
// campaign and progress over them (the Server's stores too).
func (f *fixture) rewire(tb testing.TB, edit func(*deps)) {
	tb.Helper()
	edit(&f.deps)
	_, acts, prog, err := f.deps.services(f.arch, f.bms, f.dirUsed)
	if err != nil {
		tb.Fatal(err)
	}
	f.srv.acts, f.srv.prog = acts, prog
	f.srv.dis.Prog, f.srv.comp.Acts = prog, acts
}

// resolveWeCom makes the fixture's sessions of WeCom members resolve
// with acc, as Options.WeCom.Access does.
func (f *fixture) resolveWeCom(tb testing.TB, acc *access.Access) {
	tb.Helper()
	d := f.deps
	d.WeCom = &WeComLogin{Access: acc}
	ids, _, _, err := d.services(f.arch, f.bms, f.dirUsed)
	if err != nil {
		tb.Fatal(err)
	}
	f.srv.auth = ids
}

// fakeLedger is campaign.ReminderLog in memory for the HTTP tests (the MySQL
// one is campaign's, tested there and across two processes in
// cmd/internal/process).
type fakeLedger struct {
	mu       sync.Mutex
	held     map[string]bool
	reminded map[string]map[uint32]time.Time
}

var _ campaign.ReminderLog = (*fakeLedger)(nil)

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
