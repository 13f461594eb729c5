package campaign

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign/store"
)

// Approvers are who approves a notice of app by author, for the compose
// page's 需要审批：将由 张三、李四 审批 and the approval page: the rule's
// named approvers but the author, each by their directory name ("张三";
// the UserID when the directory has none), and the role whose holders
// approve too ("" when only the named ones do). nil names: the app asks
// for no approval.
func (s *Service) Approvers(ctx context.Context, app yidu.App, author string) (names []string, role yidu.Role) {
	rule := app.Approval
	if rule == nil {
		return nil, ""
	}
	var idx DirectoryIndex
	if s.o.Picking != nil {
		idx, _ = s.o.Picking.DirectoryIndex(ctx, app.CorpID) // without one: UserIDs
	}
	names = []string{}
	for _, entry := range rule.Approvers {
		kind, id, err := yidu.ParseApprover(entry)
		if err != nil || id == author {
			continue // nobody approves their own notice
		}
		name := id
		if idx != nil && (kind == yidu.ApproverWeCom || kind == "") {
			for _, p := range idx.Search(id, 20) {
				if p.UserID == id && p.Name != "" { // as MayApprove: exact
					name = p.Name
					break
				}
			}
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names, rule.Role
}

// NudgeEvery is how often the author may ask the approvers again.
const NudgeEvery = 10 * time.Minute

// nudgeBase keeps a nudge's card task_id apart from a request's
// (ApprovalTaskID's n counts requests from 1): WeCom refuses a task_id
// used before (42014, doc path 90236).
const nudgeBase = 1 << 20

// Nudge is 催办: a sender of n's app asks its approvers again, with a new
// approval card of the version waiting, at most once per NudgeEvery
// (*TooSoonError). n must be waiting for approval (ErrNotEditable). A
// nudge done is audited with its step, in its transaction; one refused
// or failed is due the row acts returns (refuseStep, stepFailed).
func (s *Service) Nudge(ctx context.Context, p *access.Principal, n yidu.Notice) (acts []Act, err error) {
	if acts, err := refuseStep(p, yidu.ActionApprovalNudge, n); err != nil {
		return acts, err
	}
	defer stepFailed(&acts, &err, yidu.ActionApprovalNudge, n.MsgID)
	if s.st == nil {
		return nil, ErrNoCampaigns
	}
	return nil, s.nudge(ctx, p, n)
}

// refuseStep is access's refusal of p's step act on n (催办, 撤回申请: a
// sender of its app may), with the row it is due (its reason the
// detail); nil when p may.
func refuseStep(p *access.Principal, act yidu.Action, n yidu.Notice) ([]Act, error) {
	d := access.Decide(p, act, access.Target{Corp: n.App.CorpID, App: n.App.Name, MsgID: n.MsgID})
	if d.Allowed {
		return nil, nil
	}
	err := fmt.Errorf("%w: %s", ErrForbidden, d.Reason)
	return []Act{{Action: act, MsgID: n.MsgID, Detail: d.Reason, Err: err}}, err
}

// stepFailed appends the row a step act on msgID that failed with *err
// is due; a step done has its row from its transaction.
func stepFailed(acts *[]Act, err *error, act yidu.Action, msgID string) {
	if *err != nil {
		due(acts, err, Act{Action: act, MsgID: msgID})
	}
}

func (s *Service) nudge(ctx context.Context, p *access.Principal, n yidu.Notice) error {
	if n.Approval != yidu.ApprovalPending || n.App.Approval == nil {
		return fmt.Errorf("%w: %s is not waiting for approval", yidu.ErrNotEditable, n.MsgID)
	}
	at := s.o.Now().UTC().Truncate(time.Millisecond)
	e := stepEvent(p, n, yidu.ActionApprovalNudge, at, "version="+n.ApprovalHash)
	st := store.ApprovalStep{Hash: n.ApprovalHash, Step: store.StepNudged, Actor: p.Name, At: at}
	nudges, err := s.st.Nudge(ctx, n, st, e, func(last time.Time) error {
		if at.Before(last.Add(NudgeEvery)) {
			return &TooSoonError{Next: last.Add(NudgeEvery).UTC()}
		}
		return nil
	})
	if err != nil {
		if errors.As(err, new(*TooSoonError)) {
			return err
		}
		return fmt.Errorf("campaign: nudge approvers of %s: %w", n.MsgID, err)
	}
	if s.o.Notify == nil {
		return nil
	}
	_, count, err := s.NeedsApproval(ctx, n)
	if err != nil {
		return err
	}
	approvers := slices.DeleteFunc(slices.Clone(n.App.Approval.Approvers), func(a string) bool { return a == n.CreatedBy })
	task := yidu.ApprovalTaskID(yidu.MsgID(n.MsgID), n.ApprovalHash, nudgeBase+nudges)
	err = s.o.Notify.AskApproval(ctx, n, n.ApprovalHash, task, count, approvers)
	if len(approvers) > 0 {
		s.told(ctx, n, fmt.Sprintf("to=approvers count=%d step=%s version=%s", len(approvers), store.StepNudged, n.ApprovalHash), err)
	}
	if err != nil {
		return fmt.Errorf("campaign: nudge approvers of %s: %w", n.MsgID, err)
	}
	return nil
}

// Withdraw is 撤回申请: a sender of n's app takes back the request for
// approval; n stays, a draft (its send_at kept) with no approval asked:
// sending or scheduling it again asks again. n must be waiting for
// approval (ErrNotEditable). Its rows as Nudge's.
func (s *Service) Withdraw(ctx context.Context, p *access.Principal, n yidu.Notice) (_ yidu.Notice, acts []Act, err error) {
	if acts, err := refuseStep(p, yidu.ActionApprovalWithdraw, n); err != nil {
		return yidu.Notice{}, acts, err
	}
	defer stepFailed(&acts, &err, yidu.ActionApprovalWithdraw, n.MsgID)
	if s.st == nil {
		return yidu.Notice{}, nil, ErrNoCampaigns
	}
	if n.Approval != yidu.ApprovalPending {
		return yidu.Notice{}, nil, fmt.Errorf("%w: %s is not waiting for approval", yidu.ErrNotEditable, n.MsgID)
	}
	at := s.o.Now().UTC().Truncate(time.Millisecond)
	e := stepEvent(p, n, yidu.ActionApprovalWithdraw, at, "version="+n.ApprovalHash)
	changed, err := s.st.Withdraw(ctx, n, store.ApprovalStep{Hash: n.ApprovalHash, Step: store.StepWithdrawn, Actor: p.Name, At: at}, e)
	if err == nil && !changed {
		err = fmt.Errorf("%w: %s changed meanwhile", yidu.ErrNotEditable, n.MsgID)
	}
	if err != nil {
		if errors.Is(err, yidu.ErrNotEditable) {
			return yidu.Notice{}, nil, err
		}
		return yidu.Notice{}, nil, fmt.Errorf("campaign: withdraw approval of %s: %w", n.MsgID, err)
	}
	n.Approval, n.ApprovalHash, n.ApprovalNow, n.State = yidu.ApprovalNone, "", false, yidu.StateDraft
	return n, nil, nil
}
