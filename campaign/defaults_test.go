package campaign

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestDefaultsRefuse pins what a Service given no optional collaborator
// does (issue 47): each act a left-out collaborator guards is refused
// with its own error, in the same order against the caller's rights, or
// answered as none, and writes nothing.
func TestDefaultsRefuse(t *testing.T) {
	f := newServiceFixture(t)
	s := New(f.store, Options{Now: f.c.now})
	ctx := context.Background()
	roles := gateRoles(t, f)
	admin, sender, other, kept, leader := roles[0].p, roles[1].p, roles[2].p, roles[3].p, roles[5].p
	n, err := s.Compose(ctx, sender, Compose{Draft: yidu.Draft{App: testApp, Title: "t", Body: "b",
		Audience: yidu.Audience{UserIDs: []string{"zhangsan"}}, Schedule: yidu.Schedule{Draft: true}}})
	testenv.Check(t, "Compose", err)
	n.CreatedBy = "gone" // an author nobody can resolve: not checked without Authors
	sent := n
	sent.State = yidu.StateSent
	recalled := f.m
	recalled.RecalledAt = f.c.now()
	pol := yidu.Policy{Reminders: []string{"2h"}}
	reg := yidu.Registration{App: testApp, Title: "t", Audience: yidu.Audience{UserIDs: []string{"zhangsan"}}, Send: true}
	const uncheckable = "forbidden: audience: your role is kept to an audience this server cannot check"
	is := func(want error) func(error) bool { return func(err error) bool { return errors.Is(err, want) } }
	says := func(want string) func(error) bool {
		return func(err error) bool { return err != nil && err.Error() == want }
	}
	none := func(err error) bool { return err == nil }
	before := checksums(t, f)
	for _, tc := range []struct {
		name string
		do   func() error
		want func(error) bool
	}{
		// Registrar
		{"register", func() error { _, err := s.Post(ctx, sender, Post{Outgoing: Outgoing{Registration: reg}}); return err }, is(ErrNoRegistrar)},
		// Rounds
		{"posted follow-up", func() error {
			_, err := s.Post(ctx, sender, Post{Outgoing: Outgoing{Registration: reg, FollowUp: &pol, FollowUpSet: true}})
			return err
		}, is(ErrNoFollowUps)},
		{"no follow-ups", func() error {
			app := testApp
			app.FollowUp = &pol
			if s.FollowUps() || s.DefaultFollowUp(app, false) != nil {
				return errors.New("follow-ups reported")
			}
			_, found, err := s.FollowUpOf(ctx, f.m)
			if found {
				return errors.New("a follow-up found")
			}
			return err
		}, none},
		{"may follow up", func() error { return s.MayFollowUp(sender, f.m) }, is(ErrNoFollowUps)},
		{"may follow up, another app's sender", func() error { return s.MayFollowUp(other, f.m) }, is(ErrForbidden)},
		{"set follow-up", func() error { _, err := s.SetFollowUp(ctx, sender, f.m, pol); return err }, is(ErrNoFollowUps)},
		{"store follow-up of a recalled notice", func() error { return s.StoreFollowUp(ctx, sender, recalled, pol) }, is(ErrNoFollowUps)},
		{"cancel round", func() error { _, _, err := s.CancelRound(ctx, sender, f.m); return err }, is(ErrNoFollowUps)},
		{"edit a sent notice's text and policy", func() error {
			title := "u"
			_, _, err := s.Edit(ctx, sender, sent, yidu.Patch{Title: &title}, &pol)
			return err
		}, is(ErrNoFollowUps)},
		// Templates (and Files behind them)
		{"create template, not an admin", func() error {
			_, _, err := s.CreateTemplate(ctx, other, yidu.Template{App: testApp, Name: "x"})
			return err
		}, is(ErrNoTemplates)},
		{"list templates, not a sender", func() error {
			l, err := s.ListTemplates(ctx, other, testApp)
			if l != nil {
				return errors.New("templates listed")
			}
			return err
		}, none},
		{"template", func() error { _, _, err := s.Template(ctx, admin, 1); return err }, is(ErrNoTemplates)},
		{"update template", func() error { _, _, _, err := s.UpdateTemplate(ctx, admin, 1, yidu.Template{Name: "x"}); return err }, is(ErrNoTemplates)},
		{"delete template", func() error { _, err := s.DeleteTemplate(ctx, admin, 1); return err }, is(ErrNoTemplates)},
		// Messages
		{"may reach", func() error { return s.MayReach(ctx, f.m.CorpID, f.m.MsgID) },
			says(ErrNotApproved.Error() + ": notice-1: this server cannot look the message up to check it")},
		// Members
		{"press card", func() error {
			_, err := s.PressCard(ctx, testApp.CorpID, testApp.Name, "lisi", "t", "approve")
			return err
		}, says("campaign: approval cards' presses are not configured")},
		// Reminders, Readers, Scope
		{"remind", func() error { _, err := s.Remind(ctx, Remind{Caller: sender, Message: f.m}); return err }, is(ErrNoReminderLog)},
		{"remind, kept to an audience", func() error { _, err := s.Remind(ctx, Remind{Caller: kept, Message: f.m}); return err }, is(ErrNoReminderLog)},
		{"remind, a leader", func() error { _, err := s.Remind(ctx, Remind{Caller: leader, Message: f.m}); return err },
			says(ErrForbidden.Error() + ": your role may not remind through this app")},
		{"recall", func() error { _, err := s.Recall(ctx, Recall{Caller: sender, Message: f.m}); return err }, is(ErrNoReminderLog)},
		{"reminders kept", func() error {
			l, err := s.ManualReminders(ctx, f.m)
			if l == nil || len(l) > 0 {
				return errors.New("not an empty list")
			}
			return err
		}, none},
		{"reconfirm", func() error {
			k, err := s.Reconfirm(ctx, f.m, 2, "x")
			if k != 0 {
				return errors.New("cards sent")
			}
			return err
		}, none},
		// Audiences
		{"audience of a sender kept to one", func() error { return s.CheckAudience(ctx, kept, testApp, yidu.Audience{All: true}) }, says(uncheckable)},
		{"limit of a sender kept to an audience", func() error { _, err := s.Limit(ctx, kept, testApp); return err }, says(uncheckable)},
		{"limit of a sender", func() error {
			l, err := s.Limit(ctx, sender, testApp)
			if !l.All() {
				return errors.New("not everyone")
			}
			return err
		}, none},
		// Standing
		{"posted standing", func() error {
			_, err := s.Post(ctx, sender, Post{Outgoing: Outgoing{Registration: reg}, Standing: &yidu.Standing{}})
			return err
		}, says("standing: standing notices are not configured on this server")},
		{"end standing, not an admin", func() error { _, err := s.EndStanding(ctx, other, f.m, nil); return err },
			says("campaign: standing notices are not configured")},
		// Versions
		{"posted content", func() error {
			_, err := s.Post(ctx, sender, Post{Outgoing: Outgoing{Registration: reg, Content: Content{Has: true, Markdown: "x"}}})
			return err
		}, is(ErrNoContent)},
		{"has content", func() error {
			if has, err := s.HasContent(ctx, f.m.CorpID, f.m.MsgID); has || err != nil {
				return errors.New("content found")
			}
			return nil
		}, none},
		// Picking
		{"preview, kept to an audience", func() error { _, err := s.Preview(ctx, kept, testApp, yidu.Audience{All: true}); return err }, is(ErrNoDirectory)},
		{"picker", func() error { _, err := s.Picker(ctx, sender, testApp); return err }, is(ErrNoDirectory)},
		{"sort list", func() error { _, _, err := s.SortList(ctx, testApp, []string{"zhangsan"}); return err }, is(ErrNoDirectory)},
		{"approvers by UserID", func() error {
			app := testApp
			app.Approval = &yidu.Approval{Approvers: []string{"wecom:lisi", "wecom:gone"}}
			if names, _ := s.Approvers(ctx, app, "gone"); !slices.Equal(names, []string{"lisi"}) {
				return errors.New("approvers named otherwise")
			}
			if d := s.TopDepartments(ctx, n); d == nil || len(d) > 0 {
				return errors.New("departments found")
			}
			return nil
		}, none},
		// Notify, ReadingPage, Authors
		{"approval cards retried", func() error {
			k, err := s.RetryApprovalCards(ctx, nil)
			if k != 0 {
				return errors.New("cards tried")
			}
			return err
		}, none},
		{"approval view", func() error {
			v, err := s.ApprovalView(ctx, admin, n)
			if v.ReadingPage != "" || v.Standing != nil {
				return errors.New("a reading page or a standing rule shown")
			}
			return err
		}, none},
		{"at its time, an author gone", func() error {
			why, err := s.AtItsTime(ctx, n)
			if why != "" {
				return errors.New("held: " + why)
			}
			return err
		}, none},
	} {
		if err := tc.do(); !tc.want(err) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if after := checksums(t, f); !maps.Equal(before, after) {
		t.Errorf("written: %v, was %v", after, before)
	}
	var rows int
	testenv.Check(t, "count", f.db.QueryRow(`SELECT (SELECT COUNT(*) FROM notice_templates) + (SELECT COUNT(*) FROM notice_approvals)
		+ (SELECT COUNT(*) FROM standing_notices) + (SELECT COUNT(*) FROM approval_card_retries) + (SELECT COUNT(*) FROM messages)`).Scan(&rows))
	if rows != 0 {
		t.Errorf("%d rows written", rows)
	}
}
