package campaign

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign/cards"
	"github.com/yidu-io/yidu/internal/testenv"
)

// members answers access.Access.WeCom from a table: a missing name is no
// member.
type members map[string]*access.Principal

func (m members) WeCom(_ context.Context, _ string, userID string) (*access.Principal, error) {
	p, ok := m[userID]
	switch {
	case !ok:
		return nil, access.ErrNotMember
	case p == nil:
		return nil, access.ErrNoRole
	}
	return p, nil
}

// TestPressCard is the receiver's approval card press decided by the
// notice service: a press by no member is ignored and records nothing;
// the author's own press, and one on a card of an older version, are
// refused with the member's audit row (outcome refused, the version the
// card was for); a named approver with no role of their own approves as
// themselves, once (a second press is again and due no row).
func TestPressCard(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}
	a := newReplica(t, db, c, &registrar{}, &notifier{}, "replica-a")
	lisi := sender("lisi")
	a.svc.o.Members = members{"lisi": lisi, "wangwu": nil}
	n, err := a.svc.Compose(ctx, lisi, Compose{Draft: yidu.Draft{App: approvalApp, Title: "年终奖发放通知", Body: "请阅读",
		Audience: yidu.Audience{Departments: []int64{10}}, Schedule: yidu.Schedule{Draft: true}}})
	testenv.Check(t, "Compose", err)
	n, _, err = a.svc.SendNow(ctx, lisi, n)
	testenv.Check(t, "SendNow", err)
	if n.Approval != yidu.ApprovalPending {
		t.Fatalf("approval = %q; want pending", n.Approval)
	}
	task := yidu.ApprovalTaskID(yidu.MsgID(n.MsgID), n.ApprovalHash, 1)
	old := yidu.ApprovalTaskID(yidu.MsgID(n.MsgID), "0123456789abcdef0123456789abcdef", 1)

	got, err := a.svc.PressCard(ctx, approvalApp.CorpID, approvalApp.Name, "stranger", task, cards.ApproveKey)
	if err != nil || !got.Ignored || got.Audit != nil {
		t.Fatalf("a stranger's press = %+v, %v; want ignored, no row", got, err)
	}
	for _, tc := range []struct {
		name, by, task string
		want           error
	}{
		{"the author's own", "lisi", task, ErrOwnNotice},
		{"an older version's card", "wangwu", old, ErrApproval},
	} {
		got, err := a.svc.PressCard(ctx, approvalApp.CorpID, approvalApp.Name, tc.by, tc.task, cards.ApproveKey)
		if err != nil || !errors.Is(got.Refused, tc.want) || got.Audit == nil {
			t.Fatalf("%s: %+v, %v; want refused with %v and its row", tc.name, got, err, tc.want)
		}
		e := got.Audit
		if e.Actor != tc.by || e.ActorKind != string(access.KindWeCom) || e.Action != yidu.ActionApprove || e.Outcome != "refused" ||
			e.MsgID != n.MsgID || e.CorpID != approvalApp.CorpID || e.App != approvalApp.Name {
			t.Errorf("%s: audit row %+v; want %s's refused approve of %s", tc.name, e, tc.by, n.MsgID)
		}
	}
	for i := range 2 {
		got, err := a.svc.PressCard(ctx, approvalApp.CorpID, approvalApp.Name, "wangwu", task, cards.ApproveKey)
		if err != nil || got.Refused != nil || got.Audit != nil || got.Again != (i == 1) || got.Notice.Approval != yidu.ApprovalApproved {
			t.Fatalf("the approver's press %d = %+v, %v; want approved (again the second time), no refusal row", i, got, err)
		}
	}
	if got, err := newService(t, a.svc.st, Options{}).PressCard(ctx, approvalApp.CorpID, approvalApp.Name, "wangwu", task, cards.ApproveKey); err == nil {
		t.Errorf("a service without Members pressed: %+v; want an error", got)
	}
}
