package campaign

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
)

// The acts' audit rows come from campaign (issue 47: services decide
// and audit, edges translate): each act returns the rows it is due, a
// refusal's and a failure's included, and the dashboard only writes
// them. These tables are the rows the dashboard wrote from its own
// event and the error before; an act on invalid input is due none.

// actRows renders the rows acts would write, as "action outcome msgid
// people detail"; one on invalid input writes none.
func actRows(acts []Act) []string {
	var out []string
	for _, a := range acts {
		if o, ok := Outcome(a.Err); ok {
			out = append(out, fmt.Sprintf("%s %s %s %d %s", a.Action, o, a.MsgID, a.People, a.Detail))
		}
	}
	return out
}

// actsService is the gate's service (a sender kept to 研发 checked
// against the recipients, uids 1-5 of 研发 and 销售) with templates,
// and the fixture's message registered, so its follow-up can be set.
func actsService(t *testing.T) (*serviceFixture, *Service) {
	f := newServiceFixture(t)
	l, err := store.NewReminderLog(f.db, "replica-a", 0, f.c.now, slog.New(slog.DiscardHandler))
	testenv.Check(t, "store.NewReminderLog", err)
	rounds := &loops.Rounds{DB: f.db, Now: f.c.now, MinGap: time.Minute, Log: slog.New(slog.DiscardHandler)}
	s := newService(t, f.store, Options{Rounds: rounds, Messenger: f.msg, Scope: f.acc, Audiences: f.acc, Reminders: l,
		Readers: gateReaders{readers: readers{f: f, read: 1}, rec: roaring.BitmapOf(1, 2, 3, 4, 5)}, RemindInterval: time.Hour,
		Templates: store.NewTemplates(f.db, []yidu.App{testApp}, f.c.now), Now: f.c.now})
	_, err = f.db.Exec(`INSERT INTO messages (corp_id, msgid, app, agent_id, title, sent_at, recipient_count, audience_hash, state)
		VALUES (?, ?, ?, 1, 't', ?, 7, '', 1)`, f.m.CorpID, f.m.MsgID, f.m.App, f.m.SentAt)
	testenv.Check(t, "message", err)
	return f, s
}

// TestSentActsReturnRows: a reminder, a recall, a follow-up change and
// the cancel of a round return their rows, in order on one notice:
// refused for the role (a sender of another app) and the scope (a
// sender kept to 研发; the notice reaches 销售), failed (WeCom down),
// done, then refused for their state (too soon, no round to cancel).
func TestSentActsReturnRows(t *testing.T) {
	f, s := actsService(t)
	ctx := context.Background()
	roles := gateRoles(t, f)
	sender, other, kept := roles[1].p, roles[2].p, roles[3].p
	remind := func(p *access.Principal) []Act {
		rep, _ := s.Remind(ctx, Remind{Caller: p, Message: f.m})
		return rep.Acts
	}
	pol := yidu.Policy{Reminders: []string{"2h"}}
	setPolicy := func(p *access.Principal) []Act { acts, _ := s.SetFollowUp(ctx, p, f.m, pol); return acts }
	id := f.m.MsgID
	for _, tc := range []struct {
		name string
		do   func() []Act
		want string
	}{
		{"remind by another app's sender", func() []Act { return remind(other) }, "remind refused " + id + " 0 "},
		{"remind by a sender kept to 研发", func() []Act { return remind(kept) }, "remind refused " + id + " 0 "},
		{"remind, WeCom down", func() []Act {
			f.msg.fail = errors.New("wecom down")
			defer func() { f.msg.fail = nil }()
			return remind(sender)
		}, "remind failed " + id + " 0 "},
		{"remind", func() []Act { return remind(sender) }, "remind ok " + id + " 7 "},
		{"remind again too soon", func() []Act { return remind(sender) }, "remind refused " + id + " 0 "},
		{"remind by state", func() []Act { // these readers cannot split by state
			rep, _ := s.Remind(ctx, Remind{Caller: sender, Message: f.m, State: yidu.ReadStateOpened})
			return rep.Acts
		}, "remind failed " + id + " 0 state=opened"},
		{"recall by another app's sender", func() []Act {
			rep, _ := s.Recall(ctx, Recall{Caller: other, Message: f.m})
			return rep.Acts
		}, "recall refused " + id + " 0 "},
		{"follow-up by another app's sender", func() []Act { return setPolicy(other) }, "follow_up_change refused " + id + " 0 policy"},
		{"follow-up by a sender kept to 研发", func() []Act { return setPolicy(kept) }, "follow_up_change refused " + id + " 0 policy"},
		{"follow-up", func() []Act { return setPolicy(sender) }, "follow_up_change ok " + id + " 0 policy"},
		{"cancel round by another app's sender", func() []Act {
			_, acts, _ := s.CancelRound(ctx, other, f.m)
			return acts
		}, "follow_up_change refused " + id + " 0 cancel_round"},
		{"cancel round, none due", func() []Act {
			if ok, acts, err := s.CancelRound(ctx, sender, f.m); ok || err != nil {
				t.Errorf("CancelRound with no round = %v, %v; want false, nil", ok, err)
			} else {
				return acts
			}
			return nil
		}, "follow_up_change refused " + id + " 0 cancel_round"},
		{"recall", func() []Act {
			rep, _ := s.Recall(ctx, Recall{Caller: sender, Message: f.m})
			return rep.Acts
		}, "recall ok " + id + " 1 "},
	} {
		if got := actRows(tc.do()); !slices.Equal(got, []string{tc.want}) {
			t.Errorf("%s: rows %q; want %q", tc.name, got, tc.want)
		}
	}
}

// TestNoticeActsReturnRows: an edit, a send now and a cancel of a
// notice not sent yet return their rows: refused for the role and the
// scope, done, failed (a server keeping no notices) and refused for the
// state; an edit with a policy adds its follow_up_change row (issue 38),
// and one on invalid input is due none.
func TestNoticeActsReturnRows(t *testing.T) {
	f, s := actsService(t)
	ctx := context.Background()
	roles := gateRoles(t, f)
	admin, sender, other, kept := roles[0].p, roles[1].p, roles[2].p, roles[3].p
	d := draft(f.c, time.Hour)
	d.Audience = yidu.Audience{Departments: []int64{2, 3}}
	n, err := s.Compose(ctx, admin, Compose{Draft: d})
	testenv.Check(t, "Compose", err)
	n2, err := s.Compose(ctx, admin, Compose{Draft: d})
	testenv.Check(t, "Compose", err)
	none := newService(t, nil, Options{Now: f.c.now})
	title, pol, bad := "改", yidu.Policy{Reminders: []string{"2h"}}, yidu.Policy{Reminders: []string{"1s"}}
	edit := func(p *access.Principal, patch yidu.Patch, pol *yidu.Policy) []Act {
		_, acts, _ := s.Edit(ctx, p, n, patch, pol)
		return acts
	}
	do := func(f func(context.Context, *access.Principal, yidu.Notice) (yidu.Notice, []Act, error), p *access.Principal, n yidu.Notice) []Act {
		_, acts, _ := f(ctx, p, n)
		return acts
	}
	id := n.MsgID
	for _, tc := range []struct {
		name string
		acts []Act
		want []string
	}{
		{"edit by another app's sender", edit(other, yidu.Patch{Title: &title}, nil), []string{"edit refused " + id + " 0 "}},
		{"edit by a sender kept to 研发", edit(kept, yidu.Patch{Title: &title}, nil), []string{"edit refused " + id + " 0 "}},
		{"edit with a bad policy", edit(sender, yidu.Patch{Title: &title}, &bad), nil},
		{"edit of the policy only", edit(sender, yidu.Patch{}, &pol), []string{"follow_up_change ok " + id + " 0 policy"}},
		{"edit with a policy", edit(sender, yidu.Patch{Title: &title}, &pol), []string{"edit ok " + id + " 0 ", "follow_up_change ok " + id + " 0 policy"}},
		{"edit, no notices kept", func() []Act { _, acts, _ := none.Edit(ctx, sender, n, yidu.Patch{Title: &title}, nil); return acts }(),
			[]string{"edit failed " + id + " 0 "}},
		{"send now by another app's sender", do(s.SendNow, other, n), []string{"send refused " + id + " 0 send_now"}},
		{"send now, no notices kept", do(none.SendNow, sender, n), []string{"send failed " + id + " 0 send_now"}},
		{"send now", do(s.SendNow, sender, n), []string{"send ok " + id + " 0 send_now"}},
		{"cancel by a sender kept to 研发", do(s.Cancel, kept, n2), []string{"cancel refused " + n2.MsgID + " 0 "}},
		{"cancel, no notices kept", do(none.Cancel, sender, n2), []string{"cancel failed " + n2.MsgID + " 0 "}},
		{"cancel", do(s.Cancel, sender, n2), []string{"cancel ok " + n2.MsgID + " 0 "}},
		{"cancel again", do(s.Cancel, sender, n2), []string{"cancel refused " + n2.MsgID + " 0 "}},
	} {
		if got := actRows(tc.acts); !slices.Equal(got, tc.want) {
			t.Errorf("%s: rows %q; want %q", tc.name, got, tc.want)
		}
	}
}

// TestTemplateActsReturnRows: a template's create, update and delete
// return their "template" rows: refused for a sender (an admin only
// changes them), failed on a server keeping none, done by an admin, and
// refused once it is gone.
func TestTemplateActsReturnRows(t *testing.T) {
	f, s := actsService(t)
	ctx := context.Background()
	sender := gateRoles(t, f)[1].p
	admin := access.NewPrincipal("hr-admin", access.KindUser, false, []access.Grant{{Role: yidu.RoleAdmin, Scope: yidu.Scope{Corp: testApp.CorpID}}})
	none := newService(t, nil, Options{Now: f.c.now})
	tpl := yidu.Template{App: testApp, Name: "月度考勤提醒", Title: "请确认本月考勤", Body: "截止本月 25 日"}
	create := func(s *Service, p *access.Principal) []Act { _, acts, _ := s.CreateTemplate(ctx, p, tpl); return acts }
	saved, acts, err := s.CreateTemplate(ctx, admin, tpl)
	testenv.Check(t, "CreateTemplate", err)
	if got, want := actRows(acts), fmt.Sprintf("template ok  0 create id=%d", saved.ID); !slices.Equal(got, []string{want}) {
		t.Errorf("create: rows %q; want %q", got, want)
	}
	update := func(p *access.Principal) []Act { _, _, acts, _ := s.UpdateTemplate(ctx, p, saved.ID, tpl); return acts }
	del := func(p *access.Principal) []Act { acts, _ := s.DeleteTemplate(ctx, p, saved.ID); return acts }
	id := saved.ID
	for _, tc := range []struct {
		name string
		acts []Act
		want string
	}{
		{"create by a sender", create(s, sender), "template refused  0 create id=0"},
		{"create, no templates kept", create(none, admin), "template failed  0 create id=0"},
		{"update by a sender", update(sender), fmt.Sprintf("template refused  0 update id=%d", id)},
		{"update", update(admin), fmt.Sprintf("template ok  0 update id=%d", id)},
		{"delete by a sender", del(sender), fmt.Sprintf("template refused  0 delete id=%d", id)},
		{"delete", del(admin), fmt.Sprintf("template ok  0 delete id=%d", id)},
		{"delete again", del(admin), fmt.Sprintf("template refused  0 delete id=%d", id)},
	} {
		if got := actRows(tc.acts); !slices.Equal(got, []string{tc.want}) {
			t.Errorf("%s: rows %q; want %q", tc.name, got, tc.want)
		}
	}
}

// TestApprovalActsReturnRows: a decision (批准, 驳回), a nudge (催办) and
// a withdrawal (撤回申请) return the rows they are due: none when done
// (the step's row is written with it) or for invalid input; refused for
// the role (the author, a sender who approves nothing, a sender of
// another app), refused for the approval's state (a version not shown,
// decided already, too soon, withdrawn already), failed on a server
// keeping no notices. A decision's rows carry the version shown, a
// refusal for the role of a step its reason.
func TestApprovalActsReturnRows(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}
	a := newReplica(t, db, c, &registrar{}, &notifier{}, "replica-a")
	none := newService(t, nil, Options{Now: c.now})
	lisi, wangwu, zhaoliu := sender("lisi"), sender("wangwu"), sender("zhaoliu")
	other := access.NewPrincipal("it-sender", access.KindWeCom, false, []access.Grant{{Role: yidu.RoleSender,
		Scope: yidu.Scope{Corp: approvalApp.CorpID, Apps: []string{"it"}}}})
	pending := func() yidu.Notice {
		t.Helper()
		n, err := a.svc.Compose(ctx, lisi, Compose{Draft: yidu.Draft{App: approvalApp, Title: "年终奖发放通知", Body: "请阅读",
			Audience: yidu.Audience{Departments: []int64{10}}, Schedule: yidu.Schedule{Draft: true}}})
		testenv.Check(t, "Compose", err)
		n, _, err = a.svc.SendNow(ctx, lisi, n)
		testenv.Check(t, "SendNow", err)
		if n.Approval != yidu.ApprovalPending {
			t.Fatalf("after send now: approval %q, want pending", n.Approval)
		}
		return n
	}
	n, w := pending(), pending()
	id, hash, long := n.MsgID, n.ApprovalHash, strings.Repeat("f", 80)
	decide := func(s *Service, p *access.Principal, d Decision) []Act {
		_, _, acts, _ := s.Decide(ctx, p, n, d)
		return acts
	}
	nudge := func(s *Service, p *access.Principal) []Act { acts, _ := s.Nudge(ctx, p, n); return acts }
	withdraw := func(s *Service, p *access.Principal) []Act { _, acts, _ := s.Withdraw(ctx, p, w); return acts }
	for _, tc := range []struct {
		name string
		do   func() []Act
		want []string
	}{
		{"approve by its author", func() []Act { return decide(a.svc, lisi, Decision{Hash: hash, Approve: true}) },
			[]string{"approve refused " + id + " 0 version=" + hash}},
		{"approve by a sender who approves nothing", func() []Act { return decide(a.svc, zhaoliu, Decision{Hash: hash, Approve: true}) },
			[]string{"approve refused " + id + " 0 version=" + hash}},
		{"reject with no reason", func() []Act { return decide(a.svc, wangwu, Decision{Hash: hash}) }, nil},
		{"approve a version not shown", func() []Act { return decide(a.svc, wangwu, Decision{Hash: long, Approve: true}) },
			[]string{"approve refused " + id + " 0 version=" + yidu.Truncate(long, 64)}},
		{"approve, no notices kept", func() []Act { return decide(none, wangwu, Decision{Hash: hash, Approve: true}) },
			[]string{"approve failed " + id + " 0 version=" + hash}},
		{"nudge by another app's sender", func() []Act { return nudge(a.svc, other) },
			[]string{"approval_nudge refused " + id + " 0 your role may not ask approvers of this notice through this app"}},
		{"nudge, no notices kept", func() []Act { return nudge(none, lisi) }, []string{"approval_nudge failed " + id + " 0 "}},
		{"nudge", func() []Act { c.add(NudgeEvery); return nudge(a.svc, lisi) }, nil},
		{"nudge again too soon", func() []Act { return nudge(a.svc, lisi) }, []string{"approval_nudge refused " + id + " 0 "}},
		{"approve", func() []Act { return decide(a.svc, wangwu, Decision{Hash: hash, Approve: true}) }, nil},
		{"approve again", func() []Act { return decide(a.svc, wangwu, Decision{Hash: hash, Approve: true}) }, nil},
		{"reject once approved", func() []Act { return decide(a.svc, wangwu, Decision{Hash: hash, Reason: "晚了"}) },
			[]string{"reject refused " + id + " 0 version=" + hash}},
		{"withdraw by another app's sender", func() []Act { return withdraw(a.svc, other) },
			[]string{"approval_withdraw refused " + w.MsgID + " 0 your role may not withdraw this notice's approval request through this app"}},
		{"withdraw, no notices kept", func() []Act { return withdraw(none, lisi) }, []string{"approval_withdraw failed " + w.MsgID + " 0 "}},
		{"withdraw", func() []Act { return withdraw(a.svc, lisi) }, nil},
		{"withdraw again", func() []Act { return withdraw(a.svc, lisi) }, []string{"approval_withdraw refused " + w.MsgID + " 0 "}},
	} {
		if got := actRows(tc.do()); !slices.Equal(got, tc.want) {
			t.Errorf("%s: rows %q; want %q", tc.name, got, tc.want)
		}
	}
}

// TestTemplateChangeRefusals: a template change is decided before its
// body is taken: an admin may; a sender of the app is refused with its
// reason, one who does not send through it as such, each in the row's
// words of its method.
func TestTemplateChangeRefusals(t *testing.T) {
	f := newServiceFixture(t)
	roles := gateRoles(t, f)
	for _, tc := range []struct {
		name   string
		p      *access.Principal
		update bool
		want   []string
	}{
		{"create by an admin", roles[0].p, false, nil},
		{"create by a sender", roles[1].p, false, []string{"template refused  0 POST refused: only an admin may change the app's templates"}},
		{"update by a sender", roles[1].p, true, []string{"template refused  0 PUT refused: only an admin may change the app's templates"}},
		{"create by another app's sender", roles[2].p, false, []string{"template refused  0 POST refused: not a sender of the app"}},
		{"update by nobody", nil, true, []string{"template refused  0 PUT refused: not a sender of the app"}},
	} {
		acts, err := TemplateChange(tc.p, testApp, tc.update)
		if got := actRows(acts); !slices.Equal(got, tc.want) || (err == nil) != (tc.want == nil) || err != nil && !errors.Is(err, ErrForbidden) {
			t.Errorf("%s: rows %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}
