package dashboard

import (
	"context"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/dashboard/internal/compose"
	noticev "github.com/yidu-io/yidu/notice"
	"github.com/yidu-io/yidu/progress"
)

// The dashboard translates HTTP for three services that cmd builds:
// access (who is asking), campaign (what may be done to a notice, and
// doing it) and progress (how far a notice is, within the caller's
// View). What it needs of each is declared here, in the services'
// words, so that handlers can be tested over small fakes and the
// services over real MySQL and Redis.

// Identities answers who is asking (access.Identities): bearer tokens,
// password sign-in with its limits, and sessions.
type Identities interface {
	Bearer(tok string) (*access.Principal, bool)
	// SignIn and SignInWeCom open a session and return the audit rows
	// the attempt is due, refused and failed ones too (access decides
	// them: no row names whatever a stranger typed).
	SignIn(ctx context.Context, ip, user, password string) (access.Attempt, error)
	SignInWeCom(ctx context.Context, members access.WeComMembers, home string, f access.WeComFinish) (access.Attempt, error)
	OpenWeCom(ctx context.Context, corp, userID string) (string, *access.SignIn, error)
	Lookup(ctx context.Context, id string) (*access.SignIn, bool, error)
	SignOut(ctx context.Context, id string) error
	// TTL is how long a session lasts (the cookie's Max-Age).
	TTL() time.Duration
}

// Progress answers a notice's numbers within a View (progress.Progress).
type Progress interface {
	// Find is msgID and whom who sees of it; yidu.ErrNotFound when who
	// sees nobody of it.
	Find(ctx context.Context, who *access.Principal, msgID string) (yidu.Message, access.View, error)
	// Locate finds msgID within corps for a refused act's audit row.
	Locate(ctx context.Context, corps []string, msgID string) (yidu.Message, bool, error)
	List(ctx context.Context, caller *access.Principal, title, app, cursor string, limit int) ([]progress.ListRow, string, error)
	Counts(ctx context.Context, m yidu.Message, v access.View) (progress.Counts, error)
	Report(ctx context.Context, m yidu.Message, v access.View) (progress.Report, error)
	Departments(ctx context.Context, m yidu.Message, v access.View, who *access.Principal) ([]progress.Department, bool, error)
	Select(ctx context.Context, m yidu.Message, v access.View, who *access.Principal, q progress.Query) (*progress.Selection, error)
	Outcomes(ctx context.Context, m yidu.Message) ([]yidu.BatchOutcome, error)
	// StateCounts is how many of m's recipients within v are in each of
	// the reading page's states.
	StateCounts(ctx context.Context, m yidu.Message, v access.View) (map[yidu.ReadState]uint64, error)
	// WarmDepartments builds corp's department tree ahead of the first
	// view of a new notice.
	WarmDepartments(ctx context.Context, corp string)
}

// Campaign decides every act on a notice (campaign.Service); each
// method takes the caller and refuses what it may not do.
type Campaign interface {
	Posting
	Scheduling
	Acting
	Approving
	Picking
	Templating
}

// Posting is POST /messages: campaign checks the body with its
// defaults, then keeps it for later or for approval, or registers and
// sends it.
type Posting interface {
	Post(ctx context.Context, p *access.Principal, post campaign.Post) (campaign.Posted, error)
}

// Scheduling keeps drafts and scheduled notices.
type Scheduling interface {
	Compose(ctx context.Context, p *access.Principal, c campaign.Compose) (yidu.Notice, error)
	Notice(ctx context.Context, p *access.Principal, msgID string) (yidu.Notice, error)
	Notices(ctx context.Context, p *access.Principal, state yidu.NoticeState, title, app, cursor string, limit int) ([]yidu.Notice, string, error)
	Sent(ctx context.Context, p *access.Principal, corp, msgID string) (n yidu.Notice, found, audience bool, err error)
	// ForApprover is Notice, and the notice of an approval request to
	// its approvers; Locate finds a notice within corps for a refused
	// act's audit row; Pending is the list page's notices not yet sent.
	ForApprover(ctx context.Context, p *access.Principal, msgID string) (yidu.Notice, error)
	Locate(ctx context.Context, corps []string, msgID string) (yidu.Notice, bool, error)
	Pending(ctx context.Context, p *access.Principal, app string) ([]yidu.Notice, error)
	// Edit, Cancel and SendNow return the audit rows the act is due.
	Edit(ctx context.Context, p *access.Principal, n yidu.Notice, patch yidu.Patch, pol *yidu.Policy) (yidu.Notice, []campaign.Act, error)
	Cancel(ctx context.Context, p *access.Principal, n yidu.Notice) (yidu.Notice, []campaign.Act, error)
	SendNow(ctx context.Context, p *access.Principal, n yidu.Notice) (yidu.Notice, []campaign.Act, error)
	// PreviewContent renders a draft's kept full text as its version 1.
	PreviewContent(ctx context.Context, n yidu.Notice) (noticev.Version, error)
}

// Acting is what is done to a sent notice: reminders, the recall, its
// follow-up and new versions of its content.
type Acting interface {
	Remind(ctx context.Context, r campaign.Remind) (campaign.RemindReport, error)
	Recall(ctx context.Context, r campaign.Recall) (campaign.RecallReport, error)
	MayFollowUp(p *access.Principal, m yidu.Message) error
	// SetFollowUp and CancelRound, as Remind and Recall (their
	// reports' Acts), return the audit rows the act is due.
	SetFollowUp(ctx context.Context, p *access.Principal, m yidu.Message, pol yidu.Policy) ([]campaign.Act, error)
	CancelRound(ctx context.Context, p *access.Principal, m yidu.Message) (bool, []campaign.Act, error)
	FollowUp(ctx context.Context, p *access.Principal, m yidu.Message, whole bool) (loops.FollowUp, bool, error)
	FollowUpOf(ctx context.Context, m yidu.Message) (loops.FollowUp, bool, error)
	// DefaultFollowUp is app's default policy when follow-ups run (the
	// compose page starts from it).
	DefaultFollowUp(app yidu.App, set bool) *yidu.Policy
	// Content is a sent notice's version n (0: current) and every
	// version; HasContent whether it was sent with content.
	Content(ctx context.Context, m yidu.Message, n int, whole bool) (campaign.ContentView, error)
	HasContent(ctx context.Context, corp, msgID string) (bool, error)
	Revise(ctx context.Context, p *access.Principal, m yidu.Message, whole bool, rev campaign.Revision) (campaign.Revised, error)
	// EndStanding ends a standing notice (issue 51) and returns the
	// audit rows the act is due.
	EndStanding(ctx context.Context, p *access.Principal, m yidu.Message, until *time.Time) ([]campaign.Act, error)
	// ManualReminders is the notice's 提醒未读 history with what each achieved.
	ManualReminders(ctx context.Context, m yidu.Message) ([]campaign.ManualReminder, error)
}

// Approving is the approval of a notice that needs one (issue 41).
type Approving interface {
	ApprovalView(ctx context.Context, p *access.Principal, n yidu.Notice) (campaign.ApprovalView, error)
	// Decide, Nudge (催办) and Withdraw (撤回申请: these two are the
	// author's side of a request waiting for approval) decide who may
	// and return the audit rows a refusal or failure is due (a step
	// done is audited by campaign with it).
	Decide(ctx context.Context, p *access.Principal, n yidu.Notice, d campaign.Decision) (yidu.Notice, bool, []campaign.Act, error)
	PreviewToMe(ctx context.Context, p *access.Principal, n yidu.Notice) (string, error)
	Nudge(ctx context.Context, p *access.Principal, n yidu.Notice) ([]campaign.Act, error)
	Withdraw(ctx context.Context, p *access.Principal, n yidu.Notice) (yidu.Notice, []campaign.Act, error)
}

// Templating and Picking are what the compose page's API asks of
// campaign (dashboard/internal/compose).
type (
	Templating = compose.Templating
	Picking    = compose.Picking
)
