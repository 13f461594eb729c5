package process

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/callback"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/notice"
	"github.com/yidu-io/yidu/tracker"
)

// Approval before sending (issue 41) across the processes: the dashboard
// asks approvers through WeCom (a card from the app) and the receiver
// applies the card's 批准 press.

var _ callback.Approvals = approvalPresses{}

// approvalCards is the WeCom notifier of approvals through the apps'
// sender; nil without dashboard.public_url (the card opens the approval
// page there) or an app with approval.
func approvalCards(cfg config.Config, s tracker.Sender) *campaign.CardNotifier {
	if s == nil || cfg.Dashboard.PublicURL == "" || !anyApproval(cfg) {
		return nil
	}
	base := strings.TrimRight(cfg.Dashboard.PublicURL, "/")
	return &campaign.CardNotifier{
		Send: func(ctx context.Context, corpID string, agentID int64, body []byte) error {
			_, err := s.SendMessage(ctx, corpID, agentID, body)
			return err
		},
		Page: func(_, msgID string) string { return base + "/approve/" + url.PathEscape(msgID) },
	}
}

func anyApproval(cfg config.Config) bool {
	for _, a := range cfg.Apps {
		if a.Approval != nil {
			return true
		}
	}
	return false
}

// approvalPresses applies approval cards' presses on the receiver:
// access resolves the member the verified callback names, campaign
// decides. An approval campaign refuses (the author's own, no approver,
// an older card) is logged and answered 200: WeCom must not retry it.
type approvalPresses struct {
	acc   *access.Access
	svc   *campaign.Service
	log   *slog.Logger
	audit audit.Recorder
}

func (a approvalPresses) ApprovalPress(ctx context.Context, corpID, app, userID, taskID, key string) error {
	p, err := a.acc.WeCom(ctx, corpID, userID)
	switch {
	case errors.Is(err, access.ErrNoRole):
		// A named approver needs no role of their own.
		p, err = access.NewPrincipal(userID, access.KindWeCom, false, nil), nil
	case errors.Is(err, access.ErrNotMember):
		a.log.InfoContext(ctx, "approval press by no member ignored", "corp", corpID, "app", app)
		return nil
	}
	if err != nil {
		return err
	}
	_, again, err := a.svc.Press(ctx, p, corpID, app, taskID, key)
	switch {
	case err == nil:
		a.log.InfoContext(ctx, "approval press", "corp", corpID, "app", app, "task_id", taskID, "by", userID, "again", again)
		return nil
	case errors.Is(err, campaign.ErrForbidden), errors.Is(err, campaign.ErrApproval), errors.Is(err, campaign.ErrNotApprovalCard),
		errors.Is(err, yidu.ErrNotFound), errors.Is(err, yidu.ErrInvalid), errors.Is(err, yidu.ErrNotEditable):
		a.log.InfoContext(ctx, "approval press refused", "corp", corpID, "app", app, "task_id", taskID, "by", userID, "err", err)
		a.refused(ctx, corpID, app, userID, taskID, err)
		return nil
	}
	return err
}

// refused records a press campaign refused (the author's own, no
// approver, a card of an older version) as the page's refusals are: a
// row with the member, outcome refused. A decision taken is recorded
// by campaign with its step; a press on a notice decided already is
// none and records nothing (a WeCom retry looks the same).
func (a approvalPresses) refused(ctx context.Context, corpID, app, userID, taskID string, why error) {
	if a.audit == nil {
		return
	}
	m, prefix, _ := yidu.ParseApprovalTaskID(taskID)
	e := audit.Event{At: time.Now().UTC(), Actor: yidu.Truncate(userID, 128), ActorKind: string(access.KindWeCom), Action: yidu.ActionApprove,
		CorpID: corpID, App: app, MsgID: string(m), Outcome: "refused",
		Detail: yidu.Truncate("version="+prefix+" via=card: "+why.Error(), 500)}
	if err := a.audit.Record(ctx, e); err != nil {
		a.log.ErrorContext(ctx, "audit write failed", "action", string(e.Action), "msgid", e.MsgID, "err", err)
	}
}

// receiverApprovals builds the receiver's Approvals: nil when no app asks
// for approval.
func (m *Main) receiverApprovals() (callback.Approvals, error) {
	cfg := m.Config
	if !anyApproval(cfg) {
		return nil, nil
	}
	camps, err := campaign.NewStore(m.DB, campaign.Options{Directory: m.Mapper, Apps: DomainApps(cfg.Apps), Logger: m.Logger})
	if err != nil {
		return nil, err
	}
	acc, err := access.New(access.Config{Roles: accessRoles(cfg.Dashboard.Roles), LeadersSee: cfg.Dashboard.SeeLeaders()}, m.Mapper, time.Now)
	if err != nil {
		return nil, err
	}
	// The version hash must be the dashboard's: the same policy and
	// content readers (Rounds.FollowUpOf, notice.Store.Get).
	atts, err := attachment.New(m.DB, attachment.Options{Logger: m.Logger})
	if err != nil {
		return nil, err
	}
	notices, err := notice.New(m.DB, atts, notice.Options{Logger: m.Logger})
	if err != nil {
		return nil, err
	}
	opts := campaign.ServiceOptions{Store: camps, Rounds: &campaign.Rounds{DB: m.DB, Log: m.Logger}, Versions: notices, Logger: m.Logger}
	if n := approvalCards(cfg, m.wecomSender); n != nil {
		opts.Notify = n
	}
	return approvalPresses{acc: acc, svc: campaign.NewService(opts), log: m.Logger.With("component", "approval"), audit: audit.NewMySQL(m.DB)}, nil
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
