package campaign

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
	noticev "github.com/yidu-io/yidu/notice"
)

// gateReaders is readers with the notice's recipients (uids 1-5: 研发 2
// and 销售 3 of orgDir) for the audience of acts that reach them all.
type gateReaders struct {
	readers
	rec *roaring.Bitmap
}

func (r gateReaders) Bitmaps(_ context.Context, _ yidu.Message, v access.View) (*roaring.Bitmap, *roaring.Bitmap, error) {
	return v.Restrict(r.rec.Clone()), roaring.New(), nil
}

// gateMessages finds the fixture's message.
type gateMessages map[string]yidu.Message

func (g gateMessages) GetMessage(_ context.Context, _ []string, msgID string) (yidu.Message, bool, error) {
	m, ok := g[msgID]
	return m, ok, nil
}

// gateRoles are the callers of the act × role table.
func gateRoles(t *testing.T, f *serviceFixture) []struct {
	name string
	p    *access.Principal
} {
	kept := access.NewPrincipal("rd-sender", access.KindToken, false, []access.Grant{{Role: yidu.RoleSender,
		Scope: yidu.Scope{Corp: testApp.CorpID, Apps: []string{testApp.Name}, Audience: yidu.SenderAudience{Departments: []int64{2}}}}})
	return []struct {
		name string
		p    *access.Principal
	}{
		{"admin", access.NewPrincipal("admin", access.KindToken, true, nil)},
		{"sender", principal(t, "hr-sender", yidu.RoleSender, []string{testApp.Name}, nil)},
		{"sender of another app", principal(t, "it-sender", yidu.RoleSender, []string{"it"}, nil)},
		{"sender kept to 研发", kept},
		{"viewer", principal(t, "viewer", yidu.RoleViewer, nil, []int64{2})},
		{"leader of 研发", f.leader(t, "lead2")},
		{"approver only", access.NewPrincipal("reviewer", access.KindToken, false, nil)},
		{"nobody", nil},
	}
}

// TestAuthorizeActByRole is issue 46's table: every act on a notice to
// 研发 and 销售 (departments 2 and 3), by every kind of caller, with the
// decision authorize takes and the audit row it is due. An admin and a
// sender of the app may do everything; a sender kept to 研发 nothing (the
// notice reaches 销售: 403 naming the audience); a department leader
// only remind (its own people); a viewer, an approver who holds no role,
// a sender of another app and no caller nothing.
func TestAuthorizeActByRole(t *testing.T) {
	f := newServiceFixture(t)
	ctx := context.Background()
	s := newService(t, f.store, Options{Scope: f.acc, Audiences: f.acc,
		Readers: gateReaders{readers: readers{f: f}, rec: roaring.BitmapOf(1, 2, 3, 4, 5)}, Now: f.c.now})
	au := yidu.Audience{Departments: []int64{2, 3}}
	notice := Target{CorpID: testApp.CorpID, App: testApp.Name, Audience: &au}
	msg := MessageTarget(f.m)
	acts := []struct {
		act    Verb
		target Target
	}{
		{VerbSend, notice}, {VerbSendNow, notice}, {VerbEdit, notice}, {VerbCancel, notice},
		{VerbRemind, msg}, {VerbRecall, msg}, {VerbFollowUp, msg}, {VerbRevise, msg}, {VerbReconfirm, msg},
	}
	// want: "ok", "403" (the role) or "audience" (403 naming the field).
	want := map[string]func(Verb) string{
		"admin":                 func(Verb) string { return "ok" },
		"sender":                func(Verb) string { return "ok" },
		"sender of another app": func(Verb) string { return "403" },
		"sender kept to 研发":     func(Verb) string { return "audience" },
		"viewer":                func(Verb) string { return "403" },
		"leader of 研发": func(v Verb) string {
			if v == VerbRemind {
				return "ok"
			}
			return "403"
		},
		"approver only": func(Verb) string { return "403" },
		"nobody":        func(Verb) string { return "403" },
	}
	actions := map[Verb]yidu.Action{VerbSend: yidu.ActionSend, VerbSendNow: yidu.ActionSend, VerbEdit: yidu.ActionEdit,
		VerbCancel: yidu.ActionCancel, VerbRemind: yidu.ActionRemind, VerbRecall: yidu.ActionRecall,
		VerbFollowUp: yidu.ActionFollowUpChange, VerbRevise: yidu.ActionEdit, VerbReconfirm: yidu.ActionEdit}
	for _, role := range gateRoles(t, f) {
		for _, a := range acts {
			t.Run(fmt.Sprintf("%s/%s", role.name, a.act), func(t *testing.T) {
				err := s.authorize(ctx, a.act, role.p, a.target)
				got := "ok"
				var ae *AudienceError
				switch {
				case errors.As(err, &ae) && errors.Is(err, ErrForbidden):
					got = "audience"
				case errors.Is(err, ErrForbidden):
					got = "403"
				case err != nil:
					t.Fatalf("authorize = %v; want a decision", err)
				}
				if w := want[role.name](a.act); got != w {
					t.Fatalf("authorize(%s, %s) = %s (%v); want %s", a.act, role.name, got, err, w)
				}
				if got == "ok" {
					return
				}
				row := refusedAct(a.act, f.m.MsgID, err)
				if row.Action != actions[a.act] || row.MsgID != f.m.MsgID || !errors.Is(row.Err, ErrForbidden) {
					t.Errorf("audit row = %+v; want %s refused (ErrForbidden) of %s", row, actions[a.act], f.m.MsgID)
				}
			})
		}
	}
	t.Run("an unknown act is refused", func(t *testing.T) {
		if err := s.authorize(ctx, Verb("delete"), access.NewPrincipal("admin", access.KindToken, true, nil), msg); !errors.Is(err, ErrForbidden) {
			t.Fatalf("authorize(delete) = %v; want ErrForbidden", err)
		}
	})
	t.Run("a kept sender inside its audience may", func(t *testing.T) {
		kept := gateRoles(t, f)[3].p
		inside := newService(t, f.store, Options{Scope: f.acc, Audiences: f.acc,
			Readers: gateReaders{readers: readers{f: &serviceFixture{unread: roaring.BitmapOf(1, 2)}}, rec: roaring.BitmapOf(1, 2, 3)}, Now: f.c.now})
		rd := yidu.Audience{Departments: []int64{2}}
		for _, a := range acts {
			tg := a.target
			if tg.Audience != nil {
				tg.Audience = &rd
			}
			if err := inside.authorize(ctx, a.act, kept, tg); err != nil {
				t.Errorf("authorize(%s) of a 研发 notice = %v; want ok", a.act, err)
			}
		}
	})
	t.Run("without a way to list recipients a kept sender is refused", func(t *testing.T) {
		bare := newService(t, f.store, Options{Scope: f.acc, Audiences: f.acc, Readers: readers{f: f}, Now: f.c.now})
		if err := bare.authorize(ctx, VerbRecall, gateRoles(t, f)[3].p, msg); !errors.As(err, new(*AudienceError)) {
			t.Fatalf("authorize(recall) without recipients = %v; want an AudienceError", err)
		}
	})
}

// TestEveryActChecksAudience: each of the service's acts, called by a
// sender kept to 研发 on a notice that reaches 销售 too, is refused
// with the AudienceError before anything is written or sent; the
// revision's refusal carries its audit row.
func TestEveryActChecksAudience(t *testing.T) {
	f := newServiceFixture(t)
	ctx := context.Background()
	l, err := store.NewReminderLog(f.db, "replica-a", 0, f.c.now, slog.New(slog.DiscardHandler))
	testenv.Check(t, "store.NewReminderLog", err)
	atts, err := attachment.New(f.db, attachment.Options{Now: f.c.now})
	testenv.Check(t, "attachment.New", err)
	ns, err := noticev.New(f.db, atts, noticev.Options{Now: f.c.now})
	testenv.Check(t, "notice.New", err)
	rounds := &loops.Rounds{DB: f.db, Now: f.c.now, MinGap: time.Minute, Log: slog.New(slog.DiscardHandler)}
	s := newService(t, f.store, Options{Rounds: rounds, Messenger: f.msg, Scope: f.acc, Audiences: f.acc, Reminders: l,
		Versions: ns, Readers: gateReaders{readers: readers{f: f}, rec: roaring.BitmapOf(1, 2, 3, 4, 5)}, Now: f.c.now})
	admin := access.NewPrincipal("admin", access.KindToken, true, nil)
	kept := gateRoles(t, f)[3].p
	d := draft(f.c, time.Hour)
	d.Audience = yidu.Audience{Departments: []int64{2, 3}}
	n, err := s.Compose(ctx, admin, Compose{Draft: d})
	testenv.Check(t, "Compose", err)
	before := checksums(t, f)
	title := "改"
	for _, tc := range []struct {
		name string
		act  func() error
	}{
		{"send now", func() error { _, _, err := s.SendNow(ctx, kept, n); return err }},
		{"edit", func() error { _, _, err := s.Edit(ctx, kept, n, yidu.Patch{Title: &title}, nil); return err }},
		{"cancel", func() error { _, _, err := s.Cancel(ctx, kept, n); return err }},
		{"remind", func() error { _, err := f.remind(s, kept); return err }},
		{"recall", func() error { _, err := s.Recall(ctx, Recall{Caller: kept, Message: f.m}); return err }},
		{"set follow-up", func() error {
			_, err := s.SetFollowUp(ctx, kept, f.m, yidu.Policy{Reminders: []string{"1h"}})
			return err
		}},
		{"cancel round", func() error { _, _, err := s.CancelRound(ctx, kept, f.m); return err }},
		{"revise", func() error {
			res, err := s.Revise(ctx, kept, f.m, true, Revision{Markdown: "改写", Reacknowledge: true})
			if len(res.Acts) != 1 || res.Acts[0].Action != yidu.ActionEdit || !errors.Is(res.Acts[0].Err, ErrForbidden) {
				t.Errorf("revise's audit rows = %+v; want one edit, refused", res.Acts)
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ae *AudienceError
			if err := tc.act(); !errors.As(err, &ae) || !errors.Is(err, ErrForbidden) {
				t.Fatalf("%s by a sender kept to 研发 = %v; want a 403 AudienceError", tc.name, err)
			}
		})
	}
	after := checksums(t, f)
	for _, tb := range actTables {
		if before[tb] != after[tb] {
			t.Errorf("table %s changed by refused acts", tb)
		}
	}
	if got := f.msg.reminders(); len(got) != 0 || f.msg.recalls != 0 {
		t.Errorf("reminded %v, recalled %d; want nothing", got, f.msg.recalls)
	}
}

// TestMayReach is the approval half of the gate on MariaDB: a message
// registered without send (no notice row) to more than approval.over
// people, or asking an acknowledgement, is not approved and reaches
// nobody; one its app asks nothing for, a notice yidu sent (approved
// before it was sent) and an app without approval reach their people; a
// recalled one nobody.
func TestMayReach(t *testing.T) {
	db, _, c := setup(t)
	ctx := context.Background()
	app := yidu.App{Name: "hr", CorpID: "ww1", AgentID: 1000002, Approval: &yidu.Approval{Over: 2, Approvers: []string{"wangwu"}}}
	plain := yidu.App{Name: "ops", CorpID: "ww1", AgentID: 1000003}
	ack := yidu.App{Name: "ack", CorpID: "ww1", AgentID: 1000004, Approval: &yidu.Approval{Over: 1000, Acknowledged: true, Approvers: []string{"wangwu"}}}
	st, err := store.New(db, store.Options{Directory: directory{}, Apps: []yidu.App{app, plain, ack}, Now: c.now})
	testenv.Check(t, "store.New", err)
	// sent-1 is a notice yidu sent: its row says so.
	d := yidu.Draft{MsgID: "sent-1", App: app, Title: "已发送", Audience: yidu.Audience{UserIDs: []string{"zhangsan", "lisi"}},
		Schedule: yidu.Schedule{Draft: true}, By: "hr"}
	_, err = st.Create(ctx, d)
	testenv.Check(t, "Create", err)
	_, err = db.Exec(`UPDATE campaigns SET state = 'sent', approval = 'approved' WHERE msgid = 'sent-1'`)
	testenv.Check(t, "mark sent", err)
	// waiting-1 is a notice still waiting for approval (a draft row).
	d.MsgID, d.Audience = "waiting-1", yidu.Audience{All: true}
	_, err = st.Create(ctx, d)
	testenv.Check(t, "Create", err)
	_, err = db.Exec(`UPDATE campaigns SET approval = 'pending' WHERE msgid = 'waiting-1'`)
	testenv.Check(t, "mark pending", err)
	msgs := gateMessages{}
	sends := sentReaders{"posted-1": {{Batch: 0, Status: yidu.SendSent}}, "reminded-1": {{Batch: 0, Status: yidu.SendSent, Reminder: true}}}
	s := newService(t, st, Options{Messages: msgs, Readers: sends, Now: c.now})
	msg := func(id string, a yidu.App, people int64, rr yidu.ReadRule) yidu.Message {
		m := yidu.Message{CorpID: a.CorpID, MsgID: id, App: a.Name, Recipients: people, ReadRule: rr, SentAt: c.now()}
		msgs[id] = m
		return m
	}
	recalled := msg("recalled-1", plain, 1, "")
	recalled.RecalledAt = c.now()
	for _, tc := range []struct {
		name string
		m    yidu.Message
		want error
	}{
		{"a draft to more than over", msg("draft-1", app, 3, ""), ErrNotApproved},
		{"a draft asking an acknowledgement under a rule that approves those", msg("draft-2", ack, 2, yidu.ReadRuleAcknowledged), ErrNotApproved},
		{"a draft read by the app's signals under that rule", msg("draft-4", ack, 2, ""), nil},
		{"a draft to over people or fewer", msg("draft-3", app, 2, ""), nil},
		{"one yidu sent when its app asked no approval (the rule tightened since)", msg("posted-1", app, 3, ""), nil},
		{"a draft that was only reminded", msg("reminded-1", app, 3, ""), ErrNotApproved},
		{"a notice yidu sent once approved", msg("sent-1", app, 3, ""), nil},
		{"a notice still waiting", msg("waiting-1", app, 3, ""), ErrNotApproved},
		{"an app without approval", msg("ops-1", plain, 500, ""), nil},
		{"a recalled notice", recalled, yidu.ErrRecalled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.mayReach(ctx, tc.m)
			if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("mayReach = %v; want %v", err, tc.want)
			}
			if errors.Is(err, ErrNotApproved) && !errors.Is(err, ErrApproval) {
				t.Errorf("%v is not an ErrApproval (the dashboard's 409)", err)
			}
		})
	}
	t.Run("rounds ask by msgid", func(t *testing.T) {
		if err := s.MayReach(ctx, "ww1", "draft-1"); !errors.Is(err, ErrNotApproved) {
			t.Errorf("MayReach(draft-1) = %v; want ErrNotApproved", err)
		}
		if err := s.MayReach(ctx, "ww1", "sent-1"); err != nil {
			t.Errorf("MayReach(sent-1) = %v; want nil", err)
		}
		if err := newService(t, st, Options{Now: c.now}).MayReach(ctx, "ww1", "sent-1"); !errors.Is(err, ErrNotApproved) {
			t.Errorf("MayReach without Messages = %v; want refused (fail-closed)", err)
		}
	})
}

// sentReaders is Readers that knows each message's send batches.
type sentReaders map[string][]yidu.BatchOutcome

func (sentReaders) Unread(context.Context, yidu.Message, access.View) (*roaring.Bitmap, error) {
	return roaring.New(), nil
}

func (sentReaders) UserIDs(context.Context, string, *roaring.Bitmap) (map[uint32]string, int, error) {
	return nil, 0, nil
}

func (sentReaders) ReadNow(context.Context, yidu.Message) (int64, error) { return 0, nil }

func (r sentReaders) Outcomes(_ context.Context, m yidu.Message) ([]yidu.BatchOutcome, error) {
	return r[m.MsgID], nil
}

// ackResets counts ResetAcknowledged.
type ackResets struct{ n int }

func (a *ackResets) ResetAcknowledged(context.Context, yidu.Message) (bool, error) {
	a.n++
	return true, nil
}

// TestMaterialRevisionHeldForApproval is finding 3 on MariaDB: a
// material revision of an approved, sent notice whose app asks approval
// is held (pending, a new hash, version 1 still current, no
// acknowledgement reset); its author may not approve it; approved, it is
// published as version 2 and acknowledgements reset, once; a
// non-material revision is published at once.
func TestMaterialRevisionHeldForApproval(t *testing.T) {
	db, _, c := setup(t)
	ctx := context.Background()
	app := yidu.App{Name: testApp.Name, CorpID: testApp.CorpID, AgentID: testApp.AgentID,
		Approval: &yidu.Approval{Over: 1, Approvers: []string{"wangwu", "hr-sender"}}}
	st, err := store.New(db, store.Options{Directory: directory{}, Apps: []yidu.App{app}, Now: c.now})
	testenv.Check(t, "store.New", err)
	atts, err := attachment.New(db, attachment.Options{Now: c.now})
	testenv.Check(t, "attachment.New", err)
	ns, err := noticev.New(db, atts, noticev.Options{Now: c.now})
	testenv.Check(t, "notice.New", err)
	m := yidu.Message{CorpID: app.CorpID, MsgID: "rev-1", App: app.Name, Title: "考勤制度", Recipients: 2, SentAt: c.now()}
	acks := &ackResets{}
	s := newService(t, st, Options{Versions: ns, Messages: gateMessages{"rev-1": m}, Acknowledgements: acks, Now: c.now})
	_, err = st.Create(ctx, yidu.Draft{MsgID: "rev-1", App: app, Title: "考勤制度", Audience: yidu.Audience{UserIDs: []string{"zhangsan", "lisi"}},
		Content: &yidu.NoticeContent{Markdown: "九点上班。", Attachments: []string{}}, Schedule: yidu.Schedule{Draft: true}, By: "hr-admin"})
	testenv.Check(t, "Create", err)
	_, err = db.Exec(`UPDATE campaigns SET state = 'sent', approval = 'approved', approval_hash = 'first', started_at = ? WHERE msgid = 'rev-1'`, c.now().Add(-time.Hour))
	testenv.Check(t, "mark sent", err)
	v1, err := ns.Prepare(ctx, app.CorpID, noticev.Draft{Title: "考勤制度", Markdown: "九点上班。"})
	testenv.Check(t, "Prepare", err)
	_, err = ns.Create(ctx, app.CorpID, "rev-1", v1, noticev.Settings{}, "hr-admin")
	testenv.Check(t, "version 1", err)
	sender := principal(t, "hr-sender", yidu.RoleSender, []string{app.Name}, nil)
	versions := func() []string {
		all, err := ns.List(ctx, app.CorpID, "rev-1")
		testenv.Check(t, "List", err)
		var out []string
		for _, v := range all {
			out = append(out, fmt.Sprintf("%d:%s:%t", v.N, v.Markdown, v.Reacknowledge))
		}
		return out
	}

	res, err := s.Revise(ctx, sender, m, true, Revision{Markdown: "八点上班。", Reacknowledge: true})
	testenv.Check(t, "Revise (material)", err)
	n, err := st.Get(ctx, nil, "rev-1")
	testenv.Check(t, "Get", err)
	if !res.Pending || res.Hash == "" || n.Approval != yidu.ApprovalPending || n.ApprovalHash != res.Hash {
		t.Fatalf("material revision = pending %t hash %q; notice %s %q; want held, pending with its hash", res.Pending, res.Hash, n.Approval, n.ApprovalHash)
	}
	if got := versions(); len(got) != 1 || acks.n != 0 {
		t.Fatalf("versions %v, acknowledgement resets %d while held; want version 1 alone, none", got, acks.n)
	}
	if len(res.Acts) != 1 || res.Acts[0].Action != yidu.ActionEdit || res.Acts[0].Err != nil {
		t.Errorf("held revision's audit rows = %+v; want one edit, ok", res.Acts)
	}
	if _, _, _, err := s.Decide(ctx, sender, n, Decision{Hash: n.ApprovalHash, Approve: true}); !errors.Is(err, ErrOwnNotice) {
		t.Errorf("the reviser approving their own version = %v; want ErrOwnNotice", err)
	}
	// Reminders of the approved version 1 go on while version 2 waits.
	if err := s.mayReach(ctx, m); err != nil {
		t.Errorf("mayReach while a revision waits = %v; want nil (version 1 was approved)", err)
	}
	wangwu := access.NewPrincipal("wangwu", access.KindToken, false, nil)
	got, again, _, err := s.Decide(ctx, wangwu, n, Decision{Hash: n.ApprovalHash, Approve: true})
	testenv.Check(t, "Decide", err)
	if again || got.Approval != yidu.ApprovalApproved {
		t.Fatalf("Decide = %s again %t; want approved", got.Approval, again)
	}
	if got := versions(); len(got) != 2 || got[1] != "2:八点上班。:true" || acks.n != 1 {
		t.Fatalf("versions %v, resets %d once approved; want version 2 material, one reset", got, acks.n)
	}
	// The same approval replayed publishes nothing more.
	if _, again, _, err := s.Decide(ctx, wangwu, got, Decision{Hash: n.ApprovalHash, Approve: true}); err != nil || !again || len(versions()) != 2 {
		t.Errorf("replayed approval = again %t, %v, versions %v; want again, nothing more", again, err, versions())
	}
	res, err = s.Revise(ctx, sender, m, true, Revision{Markdown: "八点上班（错别字）。"})
	testenv.Check(t, "Revise (typo)", err)
	if res.Pending || res.Version.N != 3 || len(res.Acts) != 1 || acks.n != 1 {
		t.Errorf("a typo = pending %t version %d rows %+v resets %d; want published as 3 at once, audited, no reset", res.Pending, res.Version.N, res.Acts, acks.n)
	}
}
