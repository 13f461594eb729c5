package campaign

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
)

// growingDir is limitDir's tree (1 总部 ├ 3 销售 └ 4 研发) whose
// department 1 reaches two members, or 1,500 once grown: the directory
// a notice was composed against may differ at its time.
type growingDir struct {
	limitDir
	grown atomic.Bool
}

func (d *growingDir) Expand(_ context.Context, _ string, a yidu.Audience) (yidu.Expansion, error) {
	x := yidu.Expansion{Recipients: roaring.New()}
	for _, dep := range a.Departments {
		switch {
		case dep == 1 && d.grown.Load():
			x.Recipients.AddRange(1, 1501)
		default:
			x.Recipients.AddMany(limitMembers[dep])
		}
	}
	return x, nil
}

// authorBook is the configuration's authors, which a test changes as a
// restart with another configuration would.
type authorBook struct {
	mu sync.Mutex
	m  map[string]*access.Principal
}

func (b *authorBook) Author(_ context.Context, _ string, name string) (*access.Principal, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p, ok := b.m[name]; ok {
		return p, nil
	}
	return nil, ErrNoAuthor
}

func (b *authorBook) set(name string, p *access.Principal) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p == nil {
		delete(b.m, name)
		return
	}
	b.m[name] = p
}

func keptTo(name string, depts ...int64) *access.Principal {
	return access.NewPrincipal(name, access.KindWeCom, false, []access.Grant{{Role: yidu.RoleSender,
		Scope: yidu.Scope{Corp: approvalApp.CorpID, Apps: []string{approvalApp.Name}, Audience: yidu.SenderAudience{Departments: depts}}}})
}

// TestScheduledCheckedAtItsTime is issue 41's check at a scheduled
// notice's time, on MariaDB: composed within what its author might send
// to, it is held when the configuration has narrowed the author's
// audience since (or removed the author), and when the directory grew
// so that it needs approval it did not need at compose (approval asked
// for, by yidu); each hold is an audit row and its author is told. A
// notice still inside is sent, once. Without the check every one of
// them is sent.
func TestScheduledCheckedAtItsTime(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}
	reg, note := &registrar{}, &notifier{}
	dir := &growingDir{}
	st, err := store.New(db, store.Options{Directory: dir, Apps: []yidu.App{approvalApp}, Now: c.now})
	testenv.Check(t, "store.New", err)
	acc, err := access.New(access.Config{}, dir, c.now)
	testenv.Check(t, "access.New", err)
	book := &authorBook{m: map[string]*access.Principal{}}
	svc := newService(t, st, Options{Rounds: &loops.Rounds{DB: db, Now: c.now, MinGap: time.Minute, Log: slog.New(slog.DiscardHandler)},
		Notify: note, Audiences: acc, Authors: book, Now: c.now})
	run, err := loops.NewRunner(st, reg, loops.RunnerOptions{Owner: "replica-a", Check: svc.AtItsTime, OnHeld: func(_ context.Context, n yidu.Notice) error {
		note.mu.Lock()
		defer note.mu.Unlock()
		note.held = append(note.held, n.MsgID+" "+n.Reason)
		return nil
	}})
	testenv.Check(t, "NewRunner", err)

	compose := func(p *access.Principal, title string, dept int64) yidu.Notice {
		t.Helper()
		book.set(p.Name, p)
		n, err := svc.Compose(ctx, p, Compose{Draft: yidu.Draft{App: approvalApp, Title: title, Audience: yidu.Audience{Departments: []int64{dept}},
			Schedule: yidu.Schedule{SendAt: c.now().Add(time.Hour)}}})
		testenv.Check(t, "Compose "+title, err)
		if n.State != yidu.StateScheduled || n.Approval != yidu.ApprovalNone {
			t.Fatalf("%s composed: %s, approval %q; want scheduled, none needed", title, n.State, n.Approval)
		}
		return n
	}
	narrowed := compose(keptTo("lisi", 4), "研发部通知", 4)
	removed := compose(keptTo("zhaoliu", 4), "研发部通知二", 4)
	grown := compose(keptTo("sunqi", 1), "全公司通知", 1)
	inside := compose(keptTo("zhouba", 4), "研发部通知四", 4)

	// A restart with another configuration: lisi kept to 销售 only,
	// zhaoliu no sender any more; and 研发 grew past approval.over.
	book.set("lisi", keptTo("lisi", 3))
	book.set("zhaoliu", nil)
	dir.grown.Store(true)
	c.add(61 * time.Minute)
	_, err = run.Tick(ctx)
	testenv.Check(t, "Tick", err)

	log := audit.NewMySQL(db)
	for _, tc := range []struct {
		n        yidu.Notice
		state    yidu.NoticeState
		reason   string
		approval yidu.ApprovalState
	}{
		{narrowed, yidu.StateHeld, loops.ReasonOutsideAudience + "audience.departments", ""},
		{removed, yidu.StateHeld, loops.ReasonAuthorMayNotSend, ""},
		{inside, yidu.StateSent, "", ""},
	} {
		got, err := st.Get(ctx, nil, tc.n.MsgID)
		testenv.Check(t, "Get", err)
		sent := reg.count(tc.n.MsgID)
		if got.State != tc.state || !strings.HasPrefix(got.Reason, tc.reason) || got.Approval != tc.approval {
			t.Errorf("%s at its time: %s %q approval %q; want %s %q…", tc.n.Title, got.State, got.Reason, got.Approval, tc.state, tc.reason)
		}
		if want := map[bool]int{true: 1, false: 0}[tc.state == yidu.StateSent]; sent != want {
			t.Errorf("%s sent %d times, want %d", tc.n.Title, sent, want)
		}
		if tc.state != yidu.StateHeld {
			continue
		}
		evs, _, err := log.List(ctx, audit.Query{MsgID: tc.n.MsgID, Limit: 50})
		testenv.Check(t, "audit.List", err)
		var hold, told bool
		for _, e := range evs {
			hold = hold || e.Action == yidu.ActionHold && e.Actor == System && strings.Contains(e.Detail, tc.reason)
			told = told || e.Action == yidu.ActionNotify && strings.Contains(e.Detail, "to=author userid="+tc.n.CreatedBy)
		}
		if !hold || !told {
			t.Errorf("%s: audit has hold %v, author told %v; want both: %+v", tc.n.Title, hold, told, evs)
		}
	}

	// Grown past approval.over since compose: approval is asked for
	// (by yidu, the version at its time) and it is held 待审批.
	got, err := st.Get(ctx, nil, grown.MsgID)
	testenv.Check(t, "Get", err)
	if got.State != yidu.StateHeld || got.Reason != loops.ReasonAwaitingApproval || got.Approval != yidu.ApprovalPending || reg.count(grown.MsgID) != 0 {
		t.Errorf("grown at its time: %s %q approval %q sent %d; want held 待审批, pending, unsent", got.State, got.Reason, got.Approval, reg.count(grown.MsgID))
	}
	if len(note.asked) != 1 || note.counts[0] != 1500 {
		t.Errorf("approvers asked %v for %v people, want once for 1500", note.asked, note.counts)
	}
	trail, err := svc.ApprovalTrail(ctx, got)
	testenv.Check(t, "ApprovalTrail", err)
	if len(trail) != 2 || trail[0].Step != store.StepRequested || trail[0].Actor != System || trail[1].Step != store.StepHeld || trail[0].Hash != got.ApprovalHash {
		t.Errorf("trail %+v, want requested by yidu then held, of the version at its time", trail)
	}
	held := strings.Join(note.held, "\n")
	for _, n := range []yidu.Notice{narrowed, removed, grown} {
		if !strings.Contains(held, n.MsgID) {
			t.Errorf("author of %s not told: %v", n.Title, note.held)
		}
	}

	// A check that cannot answer holds nothing and sends nothing: the
	// notice waits for the next poll.
	again := compose(keptTo("zhouba", 4), "研发部通知五", 4)
	failing, err := loops.NewRunner(st, reg, loops.RunnerOptions{Owner: "replica-b", Check: func(context.Context, yidu.Notice) (string, error) {
		return "", errors.New("directory unavailable")
	}})
	testenv.Check(t, "NewRunner", err)
	c.add(61 * time.Minute)
	_, err = failing.Tick(ctx)
	testenv.Check(t, "Tick", err)
	if got, _ := st.Get(ctx, nil, again.MsgID); got.State != yidu.StateScheduled || reg.count(again.MsgID) != 0 {
		t.Errorf("check failed: %s, sent %d; want scheduled, unsent", got.State, reg.count(again.MsgID))
	}
}
