package campaign

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
	noticev "github.com/yidu-io/yidu/notice"
)

// echoRegistrar registers what it is given as a message of two people,
// created the first time its msgid is seen.
type echoRegistrar struct{ seen map[string]bool }

func (r *echoRegistrar) RegisterAndSend(_ context.Context, reg yidu.Registration) (yidu.Registered, error) {
	created := !r.seen[reg.MsgID]
	r.seen[reg.MsgID] = true
	m := yidu.Message{CorpID: reg.App.CorpID, MsgID: reg.MsgID, App: reg.App.Name, Title: reg.Title, Recipients: 2, SentAt: reg.SentAt}
	return yidu.Registered{Message: m, Created: created}, nil
}

// TestPost: what POST /messages asks is decided by campaign, and the
// audit rows it is due come back with it. Refused input writes nothing
// and is due no row; a draft and a scheduled notice are composed; a
// notice sent now is registered (a replay that sends nothing is due no
// row); one that needs approval is kept as a draft asking for it.
func TestPost(t *testing.T) {
	f := newServiceFixture(t)
	approved := yidu.App{Name: "hr-big", CorpID: testApp.CorpID, AgentID: 1000003, Approval: &yidu.Approval{Over: 1, Approvers: []string{"boss"}}}
	st, err := store.New(f.db, store.Options{Directory: directory{}, Apps: []yidu.App{testApp, approved}, Now: f.c.now})
	testenv.Check(t, "store.New", err)
	sender := principal(t, "hr", yidu.RoleSender, []string{testApp.Name, approved.Name}, nil)
	viewer := principal(t, "viewer", yidu.RoleViewer, nil, []int64{2})
	two := yidu.Audience{UserIDs: []string{"zhangsan", "lisi"}}
	post := func(id string, app yidu.App, send bool) Post {
		return Post{Outgoing: Outgoing{Registration: yidu.Registration{MsgID: id, App: app, Title: "考勤制度", Body: "请阅读", Audience: two, Send: send}}}
	}
	tests := []struct {
		name     string
		who      string
		post     Post
		err      error
		kept     bool
		approval bool
		acts     []yidu.Action
		people   int64
	}{
		{"viewer may not send", "viewer", post("p-viewer", testApp, true), ErrForbidden, false, false, nil, 0},
		{"send_at without send", "hr", func() Post { p := post("p-nosend", testApp, false); p.SendAt = f.c.now().Add(time.Hour); return p }(), yidu.ErrInvalid, false, false, nil, 0},
		{"sent_at with draft", "hr", func() Post { p := post("p-sentat", testApp, false); p.Draft, p.SentAt = true, f.c.now(); return p }(), yidu.ErrInvalid, false, false, nil, 0},
		{"draft", "hr", func() Post { p := post("p-draft", testApp, false); p.Draft = true; return p }(), nil, true, false, []yidu.Action{yidu.ActionCompose}, 0},
		{"scheduled", "hr", func() Post { p := post("p-later", testApp, true); p.SendAt = f.c.now().Add(time.Hour); return p }(), nil, true, false, []yidu.Action{yidu.ActionSchedule}, 0},
		{"sent now", "hr", post("p-now", testApp, true), nil, false, false, []yidu.Action{yidu.ActionSend}, 2},
		{"replay registering nothing new", "hr", post("p-now", testApp, false), nil, false, false, nil, 0},
		{"needs approval", "hr", post("p-approve", approved, true), nil, true, true, []yidu.Action{yidu.ActionCompose}, 0},
	}
	s := f.service(t, "a")
	s.o.Registrar, s.st = &echoRegistrar{seen: map[string]bool{}}, st
	for _, tt := range tests {
		f.c.add(time.Second) // newest first within a state
		t.Run(tt.name, func(t *testing.T) {
			p := sender
			if tt.who == "viewer" {
				p = viewer
			}
			res, err := s.Post(context.Background(), p, tt.post)
			if !errors.Is(err, tt.err) {
				t.Fatalf("Post = %v; want %v", err, tt.err)
			}
			var acts []yidu.Action
			var people int64
			for _, a := range res.Acts {
				acts, people = append(acts, a.Action), people+a.People
			}
			if !slices.Equal(acts, tt.acts) || people != tt.people {
				t.Errorf("acts = %v (%d people); want %v (%d)", acts, people, tt.acts, tt.people)
			}
			if res.Kept() != tt.kept || res.Approval != tt.approval {
				t.Errorf("kept %v approval %v; want %v %v", res.Kept(), res.Approval, tt.kept, tt.approval)
			}
			rows := testenv.Column[int](t, f.db, "SELECT COUNT(*) FROM campaigns WHERE msgid = ?", tt.post.MsgID)
			if want := map[bool]int{true: 1}[tt.kept]; rows[0] != want {
				t.Errorf("%d campaigns rows of %s; want %d", rows[0], tt.post.MsgID, want)
			}
			if tt.approval && res.Notice.Approval != yidu.ApprovalPending {
				t.Errorf("approval = %q; want pending", res.Notice.Approval)
			}
		})
	}

	// What was kept is its senders' list page (held, failed, sending,
	// scheduled, drafts, in that order), nobody else's; the notice asking
	// for approval is its approver's to see, though he sends none.
	pending, err := s.Pending(context.Background(), sender, "")
	testenv.Check(t, "Pending", err)
	var got []string
	for _, n := range pending {
		got = append(got, n.MsgID+":"+string(n.State))
	}
	if want := []string{"p-later:scheduled", "p-approve:draft", "p-draft:draft"}; !slices.Equal(got, want) {
		t.Errorf("Pending = %v; want %v", got, want)
	}
	if none, _ := s.Pending(context.Background(), viewer, ""); len(none) != 0 {
		t.Errorf("a viewer's pending = %d notices; want none", len(none))
	}
	boss := principal(t, "boss", yidu.RoleViewer, nil, []int64{2})
	if _, err := s.Notice(context.Background(), boss, "p-approve"); !errors.Is(err, yidu.ErrNotFound) {
		t.Errorf("yidu.Notice to the approver = %v; want not found (he sends none)", err)
	}
	if n, err := s.ForApprover(context.Background(), boss, "p-approve"); err != nil || n.MsgID != "p-approve" {
		t.Errorf("ForApprover(boss) = %q, %v; want the notice", n.MsgID, err)
	}
	if _, err := s.ForApprover(context.Background(), viewer, "p-approve"); !errors.Is(err, yidu.ErrNotFound) {
		t.Errorf("ForApprover(a viewer, no approver) = %v; want not found", err)
	}
}

// textFirst registers like echoRegistrar and notes, when it sends,
// whether the notice's version 1 is kept already.
type textFirst struct {
	echoRegistrar
	ns     *noticev.Store
	sends  int
	before bool
}

func (r *textFirst) RegisterAndSend(ctx context.Context, reg yidu.Registration) (yidu.Registered, error) {
	if reg.Send {
		_, err := r.ns.Get(ctx, reg.App.CorpID, reg.MsgID, 1)
		r.sends, r.before = r.sends+1, err == nil
	}
	return r.echoRegistrar.RegisterAndSend(ctx, reg)
}

// TestPostKeepsTextBeforeCards: a notice sent now with its full text is
// registered, its version 1 kept, and only then are its cards sent (a
// member who taps the first card finds the text); one audit row, the
// send.
func TestPostKeepsTextBeforeCards(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	atts, err := attachment.New(db, attachment.Options{})
	testenv.Check(t, "attachment.New", err)
	ns, err := noticev.New(db, atts, noticev.Options{})
	testenv.Check(t, "notice.New", err)
	reg := &textFirst{echoRegistrar: echoRegistrar{seen: map[string]bool{}}, ns: ns}
	page := func(app, msgID string) string { return "https://read.example.com/r/" + app + "/" + msgID }
	svc := newService(t, nil, Options{Registrar: reg, Versions: ns, ReadingPage: page})
	res, err := svc.Post(ctx, sender("lisi"), Post{Outgoing: Outgoing{
		Registration: yidu.Registration{App: testApp, Title: "考勤制度", Audience: yidu.Audience{Departments: []int64{2}}, Send: true},
		Content:      Content{Has: true, Markdown: "第一条 上班时间为 9:00。"}}})
	testenv.Check(t, "Post", err)
	if reg.sends != 1 || !reg.before {
		t.Errorf("sent %d times, version 1 kept before: %v; want once, after it was kept", reg.sends, reg.before)
	}
	if len(res.Acts) != 1 || res.Acts[0].Action != yidu.ActionSend || res.Acts[0].Err != nil || res.Acts[0].MsgID == "" {
		t.Errorf("acts = %+v; want one send", res.Acts)
	}
}
