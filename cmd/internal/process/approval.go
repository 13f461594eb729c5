package process

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/callback"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/campaign/cards"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/internal/loop"
	"github.com/yidu-io/yidu/tracker"
	"github.com/yidu-io/yidu/wecom"
)

// Approval before sending (issue 41) across the processes: the dashboard
// asks approvers through WeCom (a card from the app) and the receiver
// applies the card's 批准 press.

var (
	_ callback.Approvals        = approvalPresses{}
	_ campaign.ApprovalNotifier = (*cards.Notifier)(nil)
	_ campaign.Previewer        = (*cards.Notifier)(nil)
)

// approvalCards is the WeCom notifier of approvals through the apps'
// sender; nil without dashboard.public_url (the card opens the approval
// page there) or an app with approval.
func approvalCards(cfg config.Config, s tracker.Sender) *cards.Notifier {
	if s == nil || cfg.Dashboard.PublicURL == "" || !anyApproval(cfg) {
		return nil
	}
	base := strings.TrimRight(cfg.Dashboard.PublicURL, "/")
	return &cards.Notifier{
		Send: func(ctx context.Context, corpID string, agentID int64, body []byte) error {
			res, err := s.SendMessage(ctx, corpID, agentID, body)
			return cardOutcome(res, err)
		},
		Page: func(_, msgID string) string { return base + "/approve/" + url.PathEscape(msgID) },
	}
}

// errTaskIDUsed is WeCom's answer to a reused task_id (42014, doc path
// 90236): a card retried after an answer that was lost went out the
// first time.
const errTaskIDUsed = 42014

// cardOutcome is a message/send answer as the approval notifier takes
// it: an errcode other than 0 is a failure (issue 46: one was audited ok
// and never sent again), but 42014, the card already sent.
func cardOutcome(res wecom.SendResult, err error) error {
	switch {
	case err != nil:
		return err
	case res.ErrCode == errTaskIDUsed, res.ErrCode == 0:
		return nil
	}
	return &cards.RefusedError{Code: res.ErrCode, Msg: res.ErrMsg}
}

// namedApprovers are the WeCom members apps[].approval names, by corp:
// they sign in with WeCom to the approval page without a role of their
// own (user: and token: approvers sign in as those).
func namedApprovers(cfg config.Config) map[string][]string {
	out := map[string][]string{}
	for _, a := range cfg.Apps {
		if a.Approval != nil {
			out[a.CorpID] = append(out[a.CorpID], a.Approval.Rule().WeComApprovers()...)
		}
	}
	return out
}

func anyApproval(cfg config.Config) bool {
	for _, a := range cfg.Apps {
		if a.Approval != nil {
			return true
		}
	}
	return false
}

// approvalPresses applies approval cards' presses on the receiver
// through the process's one notice service (campaign.Service.PressCard),
// which resolves the member and decides; here its answer is logged and a
// refusal's audit row written. A press campaign refuses (the author's
// own, no approver, an older card) is answered 200: WeCom must not
// retry it.
type approvalPresses struct {
	svc   *campaign.Service
	log   *slog.Logger
	audit audit.Recorder
}

func (a approvalPresses) ApprovalPress(ctx context.Context, corpID, app, userID, taskID, key string) error {
	res, err := a.svc.PressCard(ctx, corpID, app, userID, taskID, key)
	switch {
	case err != nil:
		return err
	case res.Ignored:
		a.log.InfoContext(ctx, "approval press by no member ignored", "corp", corpID, "app", app)
	case res.Refused != nil:
		a.log.InfoContext(ctx, "approval press refused", "corp", corpID, "app", app, "task_id", taskID, "by", userID, "err", res.Refused)
		if err := a.audit.Record(ctx, *res.Audit); err != nil {
			a.log.ErrorContext(ctx, "audit write failed", "action", string(res.Audit.Action), "msgid", res.Audit.MsgID, "err", err)
		}
	default:
		a.log.InfoContext(ctx, "approval press", "corp", corpID, "app", app, "task_id", taskID, "by", userID, "again", res.Again)
	}
	return nil
}

// receiverApprovals builds the receiver's Approvals over the process's
// notice service (the dashboard's, when both run here): nil when no app
// asks for approval.
func (m *Main) receiverApprovals() (callback.Approvals, error) {
	if !anyApproval(m.Config) {
		return nil, nil
	}
	w, err := m.notices()
	if err != nil {
		return nil, err
	}
	return approvalPresses{svc: w.svc, log: m.Logger.With("component", "approval"), audit: audit.NewMySQL(m.DB)}, nil
}

// authors resolves a notice's author at its time (campaign.Authors): a
// configured password user or token of that name, else a WeCom member
// of the corp with a role. A name both a user and a member answers as
// the user (as it was composed through, most likely).
type authors struct {
	ids *access.Identities
	acc *access.Access
}

func (a authors) Author(ctx context.Context, corp, name string) (*access.Principal, error) {
	if p, ok := a.ids.Configured(name); ok {
		return p, nil
	}
	p, err := a.acc.WeCom(ctx, corp, name)
	if errors.Is(err, access.ErrNotMember) || errors.Is(err, access.ErrNoRole) {
		return nil, campaign.ErrNoAuthor
	}
	return p, err
}

// retryApprovalCards sends again, every interval until ctx ends, the
// approval cards WeCom did not take (campaign.RetryApprovalCards); each
// card is an item of g.
func retryApprovalCards(ctx context.Context, acts *campaign.Service, g *loop.Guard, interval time.Duration) {
	loop.Every(ctx, interval, func(ctx context.Context) {
		_ = g.Run(ctx, "approval card retries", func(ctx context.Context) error {
			_, err := acts.RetryApprovalCards(ctx, g)
			return err
		})
	})
}
