package campaign

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestPostStanding (issue 51): a posted standing spec is checked before
// anything is written (each field's StandingError, an audience of UserIDs
// alone, a notice not sent or kept as a draft, a cycle without
// acknowledgement); a good one is kept with the audience as asked
// whichever way the notice goes: sent now, scheduled, or held for
// approval (it enrols once sent).
func TestPostStanding(t *testing.T) {
	approved := yidu.App{Name: "hr-big", CorpID: testApp.CorpID, AgentID: 1000003, Approval: &yidu.Approval{Over: 1, Approvers: []string{"boss"}}}
	f, _, sender, s := standingService(t, testApp, approved)
	dept := yidu.Audience{Departments: []int64{2}}
	post := func(id string, app yidu.App, a yidu.Audience, spec yidu.Standing) Post {
		return Post{Outgoing: Outgoing{Registration: yidu.Registration{MsgID: id, App: app, Title: "员工手册", Audience: a, Send: true}}, Standing: &spec}
	}
	past := f.c.now().Add(-time.Hour)
	refused := []struct {
		name  string
		post  Post
		field string
	}{
		{"bad deadline", post("s-bad", testApp, dept, yidu.Standing{JoinDeadline: "7x"}), "standing.join_deadline"},
		{"until in the past", post("s-past", testApp, dept, yidu.Standing{Until: &past}), "standing.until"},
		{"userids only", post("s-ids", testApp, yidu.Audience{UserIDs: []string{"zhangsan"}}, yidu.Standing{}), "standing.audience"},
		{"not sent", func() Post {
			p := post("s-nosend", testApp, dept, yidu.Standing{})
			p.Send, p.Draft = false, true
			return p
		}(), "standing"},
		{"a draft, though send", func() Post {
			p := post("s-draft", testApp, dept, yidu.Standing{})
			p.Draft = true // "send": true, "draft": true: kept as a draft before
			return p
		}(), "standing"},
		{"cycle without acknowledgement", post("s-cycle", testApp, dept, yidu.Standing{ReacknowledgeEvery: "1y"}), "standing.reacknowledge_every"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Post(context.Background(), sender, tc.post)
			var se *yidu.StandingError
			if !errors.As(err, &se) || se.Field != tc.field || !errors.Is(err, yidu.ErrInvalid) {
				t.Fatalf("Post = %v; want a StandingError at %s", err, tc.field)
			}
			n := testenv.Column[int](t, f.db, "SELECT (SELECT COUNT(*) FROM standing_notices WHERE msgid = ?) + (SELECT COUNT(*) FROM campaigns WHERE msgid = ?)", tc.post.MsgID, tc.post.MsgID)
			if n[0] != 0 {
				t.Errorf("%d rows written; want none", n[0])
			}
		})
	}
	kept := []struct {
		name string
		post Post
	}{
		{"sent now", post("s-now", testApp, dept, yidu.Standing{})},
		{"scheduled", func() Post {
			p := post("s-later", testApp, dept, yidu.Standing{})
			p.SendAt = f.c.now().Add(time.Hour)
			return p
		}()},
		{"held for approval", post("s-approve", approved, yidu.Audience{All: true}, yidu.Standing{JoinDeadline: "14d"})},
	}
	for _, tc := range kept {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Post(context.Background(), sender, tc.post); err != nil {
				t.Fatalf("Post = %v", err)
			}
			got := testenv.Column[string](t, f.db, "SELECT CONCAT(app, ' ', audience, ' ', spec) FROM standing_notices WHERE msgid = ?", tc.post.MsgID)
			if len(got) != 1 {
				t.Fatalf("standing rows = %v; want one", got)
			}
			t.Log(got[0])
		})
	}
	spec := testenv.Column[string](t, f.db, "SELECT spec FROM standing_notices WHERE msgid = 's-approve'")[0]
	aud := testenv.Column[string](t, f.db, "SELECT audience FROM standing_notices WHERE msgid = 's-approve'")[0]
	if want := `"join_deadline":"14d"`; !strings.Contains(spec, want) || !strings.Contains(aud, `"All":true`) {
		t.Errorf("held notice's standing = %s %s; want 14d and the audience as asked (all)", spec, aud)
	}
}

// TestStandingApprovalBindsRule (issue 51: approval applies to a
// standing notice like any other): the version an approver approves
// binds the standing rule (a joiner's deadline, the cycle), so two
// notices alike but for it ask two different approvals, and a notice
// without one a third; the rule is kept before approval is asked, so
// the hash asked for is the hash the notice has at its time (the
// Runner sends it, no second request); the approver's view shows it.
func TestStandingApprovalBindsRule(t *testing.T) {
	f := newServiceFixture(t)
	approved := yidu.App{Name: "hr-big", CorpID: testApp.CorpID, AgentID: 1000003, Approval: &yidu.Approval{Over: 1, Approvers: []string{"boss"}}}
	st, err := store.New(f.db, store.Options{Directory: directory{}, Apps: []yidu.App{testApp, approved}, Now: f.c.now})
	testenv.Check(t, "store.New", err)
	sender := principal(t, "hr", yidu.RoleSender, []string{approved.Name}, nil)
	s := f.service(t, "a")
	s.o.Registrar, s.st = &echoRegistrar{seen: map[string]bool{}}, st
	s.o.Standing = &loops.StandingLoop{DB: f.db, Now: f.c.now}
	at := f.c.now().Add(time.Hour)
	ctx := context.Background()
	post := func(id string, spec *yidu.Standing) yidu.Notice {
		t.Helper()
		p := Post{Outgoing: Outgoing{Registration: yidu.Registration{MsgID: id, App: approved, Title: "员工手册", Audience: yidu.Audience{All: true}, Send: true}},
			SendAt: at, Standing: spec}
		res, err := s.Post(ctx, sender, p)
		if err != nil {
			t.Fatalf("Post %s = %v", id, err)
		}
		if res.Notice.Approval != yidu.ApprovalPending {
			t.Fatalf("%s: approval %q; want pending", id, res.Notice.Approval)
		}
		n, err := st.Get(ctx, []string{approved.CorpID}, id)
		testenv.Check(t, "Get "+id, err)
		now, err := s.ApprovalHash(ctx, n)
		testenv.Check(t, "ApprovalHash", err)
		if now != n.ApprovalHash {
			t.Errorf("%s: asked approval of %s, but its version is %s: the Runner would ask again at its time", id, n.ApprovalHash, now)
		}
		return n
	}
	week := post("s-week", &yidu.Standing{JoinDeadline: "7d"})
	fortnight := post("s-fortnight", &yidu.Standing{JoinDeadline: "14d"})
	plain := post("s-plain", nil)
	if week.ApprovalHash == fortnight.ApprovalHash || week.ApprovalHash == plain.ApprovalHash {
		t.Errorf("hashes 7d %s, 14d %s, none %s; want three (the approval binds the standing rule)", week.ApprovalHash, fortnight.ApprovalHash, plain.ApprovalHash)
	}
	v, err := s.ApprovalView(ctx, principal(t, "boss", yidu.RoleViewer, nil, []int64{1}), fortnight)
	testenv.Check(t, "ApprovalView", err)
	if v.Standing == nil || v.Standing.JoinDeadline != "14d" {
		t.Errorf("approver's view of the standing rule = %+v; want join_deadline 14d", v.Standing)
	}
	if v, _ := s.ApprovalView(ctx, principal(t, "boss", yidu.RoleViewer, nil, []int64{1}), plain); v.Standing != nil {
		t.Errorf("a notice without a standing rule shows %+v", v.Standing)
	}
	// An admin's end of the rule (until) only stops it: no new approval.
	end := f.c.now().Add(48 * time.Hour)
	_, err = f.db.Exec(`UPDATE standing_notices SET spec = JSON_SET(spec, '$.until', ?) WHERE msgid = 's-week'`, end.UTC().Format(time.RFC3339))
	testenv.Check(t, "end the rule", err)
	if h, _ := s.ApprovalHash(ctx, week); h != week.ApprovalHash {
		t.Errorf("ending the rule changed the approved version %s → %s", week.ApprovalHash, h)
	}
}

// standingService is a service over a real store of apps with the
// standing loop, and a sender through every one of them.
func standingService(t *testing.T, apps ...yidu.App) (*serviceFixture, *store.Store, *access.Principal, *Service) {
	t.Helper()
	f := newServiceFixture(t)
	st, err := store.New(f.db, store.Options{Directory: directory{}, Apps: apps, Now: f.c.now})
	testenv.Check(t, "store.New", err)
	var names []string
	for _, a := range apps {
		names = append(names, a.Name)
	}
	s := f.service(t, "a")
	s.o.Registrar, s.st = &echoRegistrar{seen: map[string]bool{}}, st
	s.o.Standing = &loops.StandingLoop{DB: f.db, Now: f.c.now}
	return f, st, principal(t, "hr", yidu.RoleSender, names, nil), s
}

// failingStandings writes the rule in the notice's transaction, then
// fails, as a process killed before its commit would.
type failingStandings struct{ *loops.StandingLoop }

func (f failingStandings) SaveIn(ctx context.Context, tx *sql.Tx, corp, msgid, app string, a yidu.Audience, spec yidu.Standing, by string) error {
	if err := f.StandingLoop.SaveIn(ctx, tx, corp, msgid, app, a, spec, by); err != nil {
		return err
	}
	return errors.New("killed before commit")
}

// TestStandingKeptWithItsNotice (issue 51): a scheduled standing notice
// and its rule are stored in one transaction; when the rule cannot be
// kept, neither is (never a notice the Runner sends later without the
// rule that enrols its joiners), and posting it again works.
func TestStandingKeptWithItsNotice(t *testing.T) {
	f, _, sender, s := standingService(t, testApp)
	loop := s.o.Standing
	p := Post{Outgoing: Outgoing{Registration: yidu.Registration{MsgID: "s-tx", App: testApp, Title: "员工手册",
		Audience: yidu.Audience{Departments: []int64{2}}, Send: true}}, SendAt: f.c.now().Add(time.Hour), Standing: &yidu.Standing{JoinDeadline: "7d"}}
	rows := func() []int {
		return testenv.Column[int](t, f.db, "SELECT (SELECT COUNT(*) FROM campaigns WHERE msgid = 's-tx') * 10 + (SELECT COUNT(*) FROM standing_notices WHERE msgid = 's-tx')")
	}
	s.o.Standing = failingStandings{loop.(*loops.StandingLoop)}
	if _, err := s.Post(context.Background(), sender, p); err == nil {
		t.Fatal("Post with its rule failing = nil; want the error")
	}
	if got := rows(); got[0] != 0 {
		t.Fatalf("rows after a failed compose = %02d (notice, rule); want 00", got[0])
	}
	s.o.Standing = loop
	if _, err := s.Post(context.Background(), sender, p); err != nil {
		t.Fatalf("Post again = %v", err)
	}
	if got := rows(); got[0] != 11 {
		t.Errorf("rows = %02d (notice, rule); want 11", got[0])
	}
}

// TestStandingEditKeepsRule (issue 51): an edit of a scheduled standing
// notice cannot change the audience its rule enrols joiners by; the
// audience sent back as it is, with another title, is an edit like any
// other, and so is keeping it as a draft until it is sent (the compose
// page's 立即发送 of an edited notice PATCHes it to a draft, then sends).
func TestStandingEditKeepsRule(t *testing.T) {
	f, st, sender, s := standingService(t, testApp)
	ctx := context.Background()
	dept := yidu.Audience{Departments: []int64{2, 3}}
	for _, id := range []string{"s-edit", "plain-edit"} {
		p := Post{Outgoing: Outgoing{Registration: yidu.Registration{MsgID: id, App: testApp, Title: "员工手册", Audience: dept, Send: true}},
			SendAt: f.c.now().Add(time.Hour)}
		if id == "s-edit" {
			p.Standing = &yidu.Standing{JoinDeadline: "7d"}
		}
		if _, err := s.Post(ctx, sender, p); err != nil {
			t.Fatalf("Post %s = %v", id, err)
		}
	}
	title := "员工手册（修订）"
	tests := []struct {
		name, msgid string
		patch       yidu.Patch
		field       string // "": allowed
	}{
		{"another audience", "s-edit", yidu.Patch{Audience: &yidu.Audience{Departments: []int64{2}}}, "audience"},
		{"the audience as it is, reordered, and a title", "s-edit", yidu.Patch{Audience: &yidu.Audience{Departments: []int64{3, 2}}, Title: &title}, ""},
		{"another audience for a notice without a rule", "plain-edit", yidu.Patch{Audience: &yidu.Audience{Departments: []int64{2}}}, ""},
		{"kept as a draft until sent (立即发送 of an edited notice)", "s-edit", yidu.Patch{Schedule: &yidu.Schedule{Draft: true}}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := st.Get(ctx, []string{testApp.CorpID}, tc.msgid)
			testenv.Check(t, "Get", err)
			_, _, err = s.Edit(ctx, sender, n, tc.patch, nil)
			var se *yidu.StandingError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("Edit = %v; want allowed", err)
			case tc.field != "" && (!errors.As(err, &se) || se.Field != tc.field):
				t.Fatalf("Edit = %v; want a StandingError at %s", err, tc.field)
			}
			after, err := st.Get(ctx, []string{testApp.CorpID}, tc.msgid)
			testenv.Check(t, "Get", err)
			if tc.field != "" && (after.State != n.State || !sameAudience(after.Audience, n.Audience) || after.Title != n.Title) {
				t.Errorf("refused edit changed the notice: %v %v %q → %v %v %q", n.State, n.Audience, n.Title, after.State, after.Audience, after.Title)
			}
		})
	}
}

// failingEnd is a standing loop whose end cannot be written.
type failingEnd struct{ *loops.StandingLoop }

func (failingEnd) End(context.Context, *access.Principal, string, string, *time.Time) error {
	return errors.New("mysql: connection refused")
}

// TestEndStandingActs (issues 47, 51): ending a standing notice returns
// the one row the act is due, decided by the service: an edit of its
// rule, ok for an admin (the end written), refused for a sender, failed
// when it cannot be written; an until in the past or a notice that is
// not standing is invalid input, no row; only an admin's end is written.
func TestEndStandingActs(t *testing.T) {
	f, _, sender, s := standingService(t, testApp)
	loop := s.o.Standing.(*loops.StandingLoop)
	ctx := context.Background()
	for _, id := range []string{"s-end", "plain"} {
		p := Post{Outgoing: Outgoing{Registration: yidu.Registration{MsgID: id, App: testApp, Title: "员工手册",
			Audience: yidu.Audience{Departments: []int64{2}}, Send: true}}}
		if id == "s-end" {
			p.Standing = &yidu.Standing{JoinDeadline: "7d"}
		}
		if _, err := s.Post(ctx, sender, p); err != nil {
			t.Fatalf("Post %s = %v", id, err)
		}
	}
	admin := principal(t, "root", yidu.RoleAdmin, nil, nil)
	past, later := f.c.now().Add(-time.Hour), f.c.now().Add(24*time.Hour)
	msg := func(id string) yidu.Message {
		return yidu.Message{CorpID: testApp.CorpID, App: testApp.Name, MsgID: id}
	}
	ended := func() string {
		return testenv.Column[string](t, f.db, "SELECT COALESCE(ended_by, '-') FROM standing_notices WHERE msgid = 's-end'")[0]
	}
	tests := []struct {
		name  string
		p     *access.Principal
		msgid string
		until *time.Time
		fail  bool
		want  []string
		ended string
	}{
		{"by a sender", sender, "s-end", nil, false, []string{"edit refused s-end 0 standing: until"}, "-"},
		{"until in the past", admin, "s-end", &past, false, nil, "-"},
		{"not a standing notice", admin, "plain", nil, false, nil, "-"},
		{"cannot be written", admin, "s-end", nil, true, []string{"edit failed s-end 0 standing: until"}, "-"},
		{"by an admin", admin, "s-end", &later, false, []string{"edit ok s-end 0 standing: until"}, "token:root"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s.o.Standing = loop
			if tc.fail {
				s.o.Standing = failingEnd{loop}
			}
			acts, err := s.EndStanding(ctx, tc.p, msg(tc.msgid), tc.until)
			if got := actRows(acts); !slices.Equal(got, tc.want) {
				t.Errorf("EndStanding rows %q (%v); want %q", got, err, tc.want)
			}
			if len(acts) != 1 || acts[0].Err != err {
				t.Errorf("EndStanding = %v with acts %+v; want its one act carrying its answer", err, acts)
			}
			if got := ended(); got != tc.ended {
				t.Errorf("ended_by = %q; want %q", got, tc.ended)
			}
		})
	}
}
