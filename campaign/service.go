package campaign

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/opt"
)

// ErrForbidden: the caller's role does not allow the act (the
// dashboard's 403). Its text says which act. It is access's refusal
// (access.Decide): one error for every act refused by role.
var ErrForbidden = access.ErrRefused

// ErrBusy: another reminder or recall of the notice holds its claim, on
// this replica or another (the dashboard's 429, retry in seconds).
var ErrBusy = errors.New("a reminder or recall of this message is in progress")

// TooSoonError: every unread person in the caller's scope was reminded
// within the interval; Next is when the first of them may be reminded
// again (the dashboard's 429 with next_allowed_at).
type TooSoonError struct{ Next time.Time }

func (e *TooSoonError) Error() string {
	return "this message was reminded recently"
}

// Messenger sends and recalls cards (tracker.Registry).
type Messenger interface {
	Remind(ctx context.Context, m yidu.Message, userIDs []string) (yidu.RemindReport, error)
	Recall(ctx context.Context, m yidu.Message, read int64) (yidu.RecallReport, error)
}

// Scope says whom a caller may remind (access.Access.RemindView).
type Scope interface {
	RemindView(ctx context.Context, p *access.Principal, corp, app string) (access.View, error)
}

// Readers says who of a notice is unread and how to address them, and
// its read count now (progress.Progress, which restores Redis from MySQL
// once when it lost the keys): campaign decides whom a reminder is for
// from them, the dashboard hands nothing in.
type Readers interface {
	// Unread is the notice's unread recipients within v.
	Unread(ctx context.Context, m yidu.Message, v access.View) (*roaring.Bitmap, error)
	// UserIDs resolves uids to the UserIDs of the active members among
	// them; skipped counts those who cannot be addressed (no UserID). A
	// member who left is neither.
	UserIDs(ctx context.Context, corpID string, uids *roaring.Bitmap) (userIDs map[uint32]string, skipped int, err error)
	// ReadNow is the notice's read count now, which a recall freezes.
	ReadNow(ctx context.Context, m yidu.Message) (int64, error)
}

// Audiences says what a sender may address (access.Access): a sender
// kept to part of the directory is refused a notice outside it.
type Audiences interface {
	CheckAudience(ctx context.Context, p *access.Principal, corp, app string, au yidu.Audience) error
	Limit(ctx context.Context, p *access.Principal, corp, app string) (access.Limit, error)
}

// AudienceError: the caller's role keeps it to part of the directory and
// the audience, at Field, is outside it (the dashboard's 403 with the
// field). It wraps ErrForbidden.
type AudienceError struct{ Field, Reason string }

func (e *AudienceError) Error() string {
	return ErrForbidden.Error() + ": " + e.Field + ": " + e.Reason
}

// Unwrap makes an AudienceError an ErrForbidden.
func (e *AudienceError) Unwrap() error { return ErrForbidden }

// Options are a Service's optional collaborators and settings. Each
// says what its zero value does: a part of the service that is not
// configured refuses its acts with its own error (ErrNoFollowUps,
// ErrNoReminderLog, ErrNoTemplates, ErrNoRegistrar, ErrNoDirectory, ...),
// never lets them through unchecked.
type Options struct {
	// Rounds keeps follow-up policies (*loops.Rounds); nil: no follow-up
	// (a posted one is refused, the apps' defaults are not applied).
	Rounds Policies
	// Messenger sends reminders and recalls.
	Messenger Messenger
	// Registrar registers and sends a posted notice now
	// (tracker.Registry); nil: Register is ErrNoRegistrar.
	Registrar Registrar
	// Scope gives a department leader's people; nil: only a sender of the
	// app (or an admin) reminds, everyone.
	Scope Scope
	// Audiences keeps senders to their audience; nil: a sender whose
	// role names an audience is refused every act through the app (never
	// let through unchecked).
	Audiences Audiences
	// Versions gives a notice's content version (its hash and read rule
	// are part of what is approved); nil: none.
	Versions Versions
	// Notify tells approvers and authors of approvals through WeCom; nil:
	// the page only (nothing is sent, nor audited as sent).
	Notify ApprovalNotifier
	// Authors resolves a notice's author at its time (AtItsTime); nil:
	// only its approval is checked then.
	Authors Authors
	// Templates keeps notice templates (从模板新建); nil: none, and
	// changing them is ErrNoTemplates.
	Templates *store.Templates
	// Files resolves a template's attachments (attachment.Store); nil:
	// they are not checked, and answered as none.
	Files Files
	// Reminders claims acts and keeps who was reminded when
	// (store.ReminderLog); nil: Remind and Recall are ErrNoReminderLog.
	Reminders ReminderLog
	// Readers says who is unread and their UserIDs; required for Remind
	// and Recall.
	Readers Readers
	// RemindInterval is the least time between two manual reminders of
	// one person (dashboard.remind_interval; default 1 h).
	RemindInterval time.Duration
	// ReadingPage is the reading page's URL of app's msgid (the
	// receiver's); a notice with content links its card there. nil: its
	// card keeps the url it was given.
	ReadingPage func(app, msgID string) string
	// Acknowledgements resets acknowledgements after a material version;
	// default: none are reset (they keep counting).
	Acknowledgements Acknowledgements
	// Messages finds registered messages for the rounds' gate
	// (MayReach); nil: MayReach refuses (fail-closed).
	Messages Messages
	// Picking lists, expands and counts audiences for the compose page
	// and the approver; nil: ErrNoDirectory (the approver sees no
	// departments).
	Picking Picking
	// Members resolves the member who pressed an approval card
	// (access.Access); nil: PressCard refuses every press.
	Members Members
	// Standing keeps standing notices' rules (*loops.StandingLoop, issue
	// 51); nil: a posted "standing" is refused.
	Standing Standings
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Standings keeps a standing notice's rule when it is posted
// (loops.StandingLoop.Save), and ends it (End).
type Standings interface {
	Save(ctx context.Context, corp, msgid, app string, a yidu.Audience, spec yidu.Standing, by string) error
	// Spec is the rule kept (ok false: none): an approval binds it.
	Spec(ctx context.Context, corp, msgid string) (spec yidu.Standing, ok bool, err error)
	// End ends msgid's standing at until (nil: now), by p: nobody is
	// enrolled after it.
	End(ctx context.Context, p *access.Principal, corp, msgid string, until *time.Time) error
}

// ReminderLog is what a person's acts on a sent notice need to act once
// across replicas (store.ReminderLog): the claim of the notice for one
// act at a time, and who was reminded when.
type ReminderLog interface {
	// Claim takes the notice for act ("remind", "recall"); ok is false
	// when another request, on any replica, holds it. release ends the
	// claim; until then the claim is renewed.
	Claim(ctx context.Context, corpID, msgID, act string) (release func(), ok bool, err error)
	// Reminded is when each person of the notice reminded after since was
	// last reminded, by hand or by a follow-up round.
	Reminded(ctx context.Context, corpID, msgID string, since time.Time) (map[uint32]time.Time, error)
	// Record writes that uids were reminded at at by by (scope: whose
	// reminder it was, "all" or "led"); Unrecord takes it back (nothing
	// was sent).
	Record(ctx context.Context, corpID, msgID string, at time.Time, by, scope string, uids []uint32) error
	Unrecord(ctx context.Context, corpID, msgID string, at time.Time) error
}

// Registrar registers and sends (tracker.Registry.RegisterAndSend): a
// repeated call with the same msgid resumes, never resending a batch an
// earlier call delivered.
type Registrar interface {
	RegisterAndSend(ctx context.Context, reg yidu.Registration) (yidu.Registered, error)
}

// noAcknowledgements resets none.
type noAcknowledgements struct{}

func (noAcknowledgements) ResetAcknowledged(context.Context, yidu.Message) (bool, error) {
	return false, nil
}

// Policies keeps follow-up policies and cancels rounds (Rounds).
type Policies interface {
	SetPolicy(ctx context.Context, corpID, msgID string, p yidu.Policy, by string) error
	CheckPolicy(p yidu.Policy, sendAt time.Time) error
	StorePolicy(ctx context.Context, corpID, msgID string, p yidu.Policy, sendAt time.Time, by string) error
	CancelRound(ctx context.Context, corpID, msgID string) (bool, error)
	// FollowUpOf is a notice's policy and rounds (found false: none).
	FollowUpOf(ctx context.Context, corpID, msgID string) (loops.FollowUp, bool, error)
}

// txStandings keeps a standing rule in the transaction of its notice's
// row (loops.StandingLoop).
type txStandings interface {
	SaveIn(ctx context.Context, tx *sql.Tx, corp, msgid, app string, a yidu.Audience, spec yidu.Standing, by string) error
}

// txPolicies stores a policy in the transaction of its notice's row
// (loops.Rounds): a compose writes both, or neither.
type txPolicies interface {
	StorePolicyIn(ctx context.Context, tx *sql.Tx, corpID, msgID string, p yidu.Policy, sendAt time.Time, by string) error
}

// Service decides the acts of people on notices: compose, edit, cancel,
// send now, remind, recall and the follow-up. Each method takes the
// caller and decides whether it may, what is due and what the defaults
// are; the dashboard only translates HTTP to and from it.
type Service struct {
	st  *store.Store
	o   Options
	log *slog.Logger

	ownerOnce sync.Once
	ownerName string // approval card retries' claims (owner)
}

// ErrNoCampaigns: the server keeps no drafts or scheduled notices.
var ErrNoCampaigns = errors.New("scheduled sending is not configured")

// ErrNoReminderLog: the server has no ReminderLog to claim reminders and
// recalls.
var ErrNoReminderLog = errors.New("reminders and recalls are not configured")

// ErrNoFollowUps: a follow_up posted to a server without the round
// engine.
var ErrNoFollowUps = yidu.Fieldf("follow_up", "follow_up: follow-up is not configured on this server")

// New returns the notice Service over st, which keeps its notices,
// approvals and card retries; o's zero values take their defaults. A nil
// st is a server that keeps no notices (only the API's registrations and
// reminders): composing, scheduling and approving are ErrNoCampaigns and
// its lists of notices are empty.
func New(st *store.Store, o Options) *Service {
	if o.Acknowledgements == nil {
		o.Acknowledgements = noAcknowledgements{}
	}
	opt.Logger(&o.Logger)
	opt.Clock(&o.Now)
	if o.RemindInterval <= 0 {
		o.RemindInterval = time.Hour
	}
	return &Service{st: st, o: o, log: o.Logger.With("component", "campaign")}
}

// RemindInterval is the least time between two manual reminders of one
// person.
func (s *Service) RemindInterval() time.Duration { return s.o.RemindInterval }

// FollowUps reports whether the server runs follow-up rounds.
func (s *Service) FollowUps() bool { return s.o.Rounds != nil }

// Edit changes a draft, scheduled or held notice of the caller's app,
// and with pol its follow-up policy, checked against the send time the
// edit leaves (now for a draft) before anything is written. A notice
// campaign already sent takes a policy and nothing else. Its rows: the
// edit (unless only pol was asked, or it failed with pol), and pol's
// follow_up_change (issue 38: a policy changed on any route).
func (s *Service) Edit(ctx context.Context, p *access.Principal, n yidu.Notice, patch yidu.Patch, pol *yidu.Policy) (_ yidu.Notice, acts []Act, err error) {
	defer func(polOnly bool) {
		if pol == nil || err == nil && !polOnly {
			due(&acts, &err, Act{Action: yidu.ActionEdit, MsgID: n.MsgID})
		}
		if pol != nil {
			due(&acts, &err, Act{Action: yidu.ActionFollowUpChange, MsgID: n.MsgID, Detail: "policy"})
		}
	}(patch == yidu.Patch{})
	if s.st == nil {
		return yidu.Notice{}, nil, ErrNoCampaigns
	}
	// The notice as it is, and as the edit leaves it, must both be
	// inside the caller's audience: nobody rewrites a notice they could
	// not have sent.
	if err := s.authorize(ctx, VerbEdit, p, NoticeTarget(n)); err != nil {
		return yidu.Notice{}, nil, err
	}
	au := n.Audience
	if patch.Audience != nil {
		au = *patch.Audience
	}
	if err := s.CheckAudience(ctx, p, n.App, au); err != nil {
		return yidu.Notice{}, nil, err
	}
	if err := s.checkStandingEdit(ctx, n, patch); err != nil {
		return yidu.Notice{}, nil, err
	}
	patch.By = p.Name
	if err := mergeKept(n, &patch); err != nil {
		return yidu.Notice{}, nil, err
	}
	if err := s.patchContent(ctx, n, &patch); err != nil {
		return yidu.Notice{}, nil, err
	}
	ed, err := s.edit(ctx, p, n, patch, pol)
	if err != nil || ed.State != yidu.StateScheduled && ed.State != yidu.StateHeld {
		return ed, nil, err
	}
	// Any edit after approval needs approval again (issue 41).
	ed, _, err = s.review(ctx, p, ed, false)
	return ed, nil, err
}

func (s *Service) edit(ctx context.Context, p *access.Principal, n yidu.Notice, patch yidu.Patch, pol *yidu.Policy) (yidu.Notice, error) {
	if pol == nil {
		return s.st.Edit(ctx, []string{n.App.CorpID}, n.MsgID, patch)
	}
	if s.o.Rounds == nil {
		return yidu.Notice{}, ErrNoFollowUps
	}
	empty := patch.Title == nil && patch.Body == nil && patch.URL == nil && patch.Audience == nil && patch.Schedule == nil && patch.Content == nil
	if n.State == yidu.StateSent {
		if !empty {
			return yidu.Notice{}, fmt.Errorf("%w: %s is sent; only follow_up can change", yidu.ErrNotEditable, n.MsgID)
		}
		if err := s.o.Rounds.SetPolicy(ctx, n.App.CorpID, n.MsgID, *pol, p.Name); err != nil {
			return yidu.Notice{}, InFollowUp(err)
		}
		return n, nil
	}
	if !n.State.Editable() {
		return yidu.Notice{}, fmt.Errorf("%w: %s is %s", yidu.ErrNotEditable, n.MsgID, n.State)
	}
	sendAt := n.SendAt
	switch {
	case patch.Schedule != nil && patch.Schedule.Draft:
		sendAt = time.Time{}
	case patch.Schedule != nil:
		sendAt = patch.Schedule.SendAt
	case n.State == yidu.StateDraft:
		sendAt = time.Time{}
	}
	sendAt = cmp.Or(sendAt, s.o.Now())
	if err := s.o.Rounds.CheckPolicy(*pol, sendAt); err != nil {
		return yidu.Notice{}, InFollowUp(err)
	}
	if !empty {
		ed, err := s.st.Edit(ctx, []string{n.App.CorpID}, n.MsgID, patch)
		if err != nil {
			return yidu.Notice{}, err
		}
		n = ed
	}
	if err := s.o.Rounds.StorePolicy(ctx, n.App.CorpID, n.MsgID, *pol, sendAt, p.Name); err != nil {
		return yidu.Notice{}, InFollowUp(err)
	}
	return n, nil
}

// patchContent checks the full text an edit leaves n keeping (its own,
// or the patch's) before anything is written, and keeps its card linked
// to its reading page. A sent notice's content changes by Revision.
func (s *Service) patchContent(ctx context.Context, n yidu.Notice, patch *yidu.Patch) error {
	if patch.Content == nil && (n.Content == nil || patch.Title == nil && patch.URL == nil) {
		return nil
	}
	if patch.Content != nil && !n.State.Editable() {
		return fmt.Errorf("%w: %s is %s; its content changes by a new version", yidu.ErrNotEditable, n.MsgID, n.State)
	}
	d := yidu.Draft{MsgID: n.MsgID, App: n.App, Title: n.Title, URL: n.URL, Content: n.Content}
	if patch.Title != nil {
		d.Title = *patch.Title
	}
	if patch.URL != nil {
		d.URL = *patch.URL
	}
	if patch.Content != nil {
		d.Content = patch.Content
	}
	if err := s.checkDraftContent(ctx, &d); err != nil {
		return err
	}
	patch.Content, patch.URL = d.Content, &d.URL
	return nil
}

// mergeKept makes patch's content the full text n keeps with what patch
// changes of it (the text and attachments; the read rule and the minimum
// reading time, from Content when not zero, else from ReadRule and
// MinReadSeconds, each alone); a notice keeping none takes no rule.
func mergeKept(n yidu.Notice, patch *yidu.Patch) error {
	if patch.Content == nil && patch.ReadRule == nil && patch.MinReadSeconds == nil {
		return nil
	}
	if patch.Content == nil && n.Content == nil {
		return yidu.Fieldf("read_rule", "read_rule: a notice without content has the app's rule")
	}
	var c yidu.NoticeContent
	if n.Content != nil {
		c = *n.Content
	}
	if pc := patch.Content; pc != nil {
		c.Markdown, c.Attachments = pc.Markdown, pc.Attachments
		c.ReadRule, c.MinReadSeconds = cmp.Or(pc.ReadRule, c.ReadRule), cmp.Or(pc.MinReadSeconds, c.MinReadSeconds)
	}
	if patch.ReadRule != nil {
		c.ReadRule = *patch.ReadRule
	}
	if patch.MinReadSeconds != nil {
		c.MinReadSeconds = *patch.MinReadSeconds
	}
	patch.Content, patch.ReadRule, patch.MinReadSeconds = &c, nil, nil
	return nil
}

// Cancel cancels a draft, scheduled or held notice of the caller's app.
func (s *Service) Cancel(ctx context.Context, p *access.Principal, n yidu.Notice) (_ yidu.Notice, acts []Act, err error) {
	defer due(&acts, &err, Act{Action: yidu.ActionCancel, MsgID: n.MsgID})
	if s.st == nil {
		return yidu.Notice{}, nil, ErrNoCampaigns
	}
	if err := s.authorize(ctx, VerbCancel, p, NoticeTarget(n)); err != nil {
		return yidu.Notice{}, nil, err
	}
	n, err = s.st.Cancel(ctx, []string{n.App.CorpID}, n.MsgID, p.Name)
	return n, nil, err
}

// SendNow makes a draft, scheduled or held notice of the caller's app due
// now; the Runner sends it once. Of concurrent requests one makes it due,
// the others are ErrNotEditable (it is already being sent). Its row is
// a send (send_now); the recipients are counted when it registers.
func (s *Service) SendNow(ctx context.Context, p *access.Principal, n yidu.Notice) (_ yidu.Notice, acts []Act, err error) {
	defer due(&acts, &err, Act{Action: yidu.ActionSend, MsgID: n.MsgID, Detail: "send_now"})
	if s.st == nil {
		return yidu.Notice{}, nil, ErrNoCampaigns
	}
	if err := s.authorize(ctx, VerbSendNow, p, NoticeTarget(n)); err != nil {
		return yidu.Notice{}, nil, err
	}
	// A notice that needs approval and has none for this version waits
	// for it, and is sent when approved (issue 41).
	if !n.State.Editable() {
		return yidu.Notice{}, nil, fmt.Errorf("%w: %s is %s", yidu.ErrNotEditable, n.MsgID, n.State)
	}
	n, ok, err := s.review(ctx, p, n, true)
	if err != nil || !ok {
		return n, nil, err
	}
	n, err = s.st.SendNow(ctx, []string{n.App.CorpID}, n.MsgID, p.Name)
	return n, nil, err
}
