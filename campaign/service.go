package campaign

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
)

// ErrForbidden: the caller's role does not allow the act (the
// dashboard's 403). Its text says which act.
var ErrForbidden = errors.New("forbidden")

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

// ServiceOptions configures a Service.
type ServiceOptions struct {
	// Store keeps drafts and scheduled notices; nil: compose, edit,
	// cancel and send now are ErrNoCampaigns.
	Store *Store
	// Rounds keeps follow-up policies (*Rounds); nil: no follow-up (a
	// posted one is refused, the apps' defaults are not applied).
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
	// Notify tells approvers and authors of approvals; nil: the page only.
	Notify ApprovalNotifier
	// Authors resolves a notice's author at its time (AtItsTime); nil:
	// only its approval is checked then.
	Authors Authors
	// Templates keeps notice templates (从模板新建); nil: none, and
	// changing them is ErrNoTemplates.
	Templates *Templates
	// Ledger claims acts and keeps who was reminded when; required for
	// Remind and Recall.
	Ledger Ledger
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
	// nil: they keep counting.
	Acknowledgements Acknowledgements
	// Picking lists, expands and counts audiences for the compose page
	// and the approver; nil: ErrNoDirectory (the approver sees no
	// departments).
	Picking Picking
	Logger  *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Policies keeps follow-up policies and cancels rounds (Rounds).
type Policies interface {
	SetPolicy(ctx context.Context, corpID, msgID string, p yidu.Policy, by string) error
	CheckPolicy(p yidu.Policy, sendAt time.Time) error
	StorePolicy(ctx context.Context, corpID, msgID string, p yidu.Policy, sendAt time.Time, by string) error
	CancelRound(ctx context.Context, corpID, msgID string) (bool, error)
	// FollowUpOf is a notice's policy and rounds (found false: none).
	FollowUpOf(ctx context.Context, corpID, msgID string) (FollowUp, bool, error)
}

// Service decides the acts of people on notices: compose, edit, cancel,
// send now, remind, recall and the follow-up. Each method takes the
// caller and decides whether it may, what is due and what the defaults
// are; the dashboard only translates HTTP to and from it.
type Service struct {
	o   ServiceOptions
	log *slog.Logger
}

// ErrNoCampaigns: the server keeps no drafts or scheduled notices.
var ErrNoCampaigns = errors.New("scheduled sending is not configured")

// InFollowUp names a policy's field as a field of the posted follow_up
// ("deadline: ..." becomes "follow_up.deadline: ...").
func InFollowUp(err error) error {
	if !errors.Is(err, yidu.ErrInvalid) {
		return err
	}
	msg := strings.TrimPrefix(err.Error(), yidu.ErrInvalid.Error()+": ")
	if strings.HasPrefix(msg, "follow_up") {
		return err
	}
	return yidu.Invalidf("follow_up.%s", msg)
}

// ErrNoLedger: the server has no Ledger to claim reminders and recalls.
var ErrNoLedger = errors.New("reminders and recalls are not configured")

// ErrNoFollowUps: a follow_up posted to a server without the round
// engine.
var ErrNoFollowUps = yidu.Invalidf("follow_up: follow-up is not configured on this server")

// NewService returns a Service.
func NewService(o ServiceOptions) *Service {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.RemindInterval <= 0 {
		o.RemindInterval = time.Hour
	}
	return &Service{o: o, log: o.Logger.With("component", "campaign")}
}

// RemindInterval is the least time between two manual reminders of one
// person.
func (s *Service) RemindInterval() time.Duration { return s.o.RemindInterval }

// FollowUps reports whether the server runs follow-up rounds.
func (s *Service) FollowUps() bool { return s.o.Rounds != nil }

// mustSend refuses a caller who may not send through app (an admin of the
// corp or a sender of the app may).
func mustSend(p *access.Principal, corp, app, what string) error {
	if p == nil || !p.MaySend(corp, app) {
		return fmt.Errorf("%w: your role may not %s through this app", ErrForbidden, what)
	}
	return nil
}

// CheckAudience refuses, with an *AudienceError naming the field, an
// audience of app that the caller may not address (issue 41: a sender
// kept to some departments and tags). It writes nothing; compose, edit,
// send now and the dashboard's preview and registration call it before
// anything is stored or sent.
func (s *Service) CheckAudience(ctx context.Context, p *access.Principal, app yidu.App, au yidu.Audience) error {
	if err := mustSend(p, app.CorpID, app.Name, "send"); err != nil {
		return err
	}
	if _, limited := p.SenderAudience(app.CorpID, app.Name); !limited {
		return nil
	}
	if s.o.Audiences == nil {
		return &AudienceError{Field: "audience", Reason: "your role is kept to an audience this server cannot check"}
	}
	return audienceErr(s.o.Audiences.CheckAudience(ctx, p, app.CorpID, app.Name, au))
}

// audienceErr turns access's OutsideError into an AudienceError.
func audienceErr(err error) error {
	var oe *access.OutsideError
	if errors.As(err, &oe) {
		return &AudienceError{Field: oe.Field, Reason: oe.Reason}
	}
	if err != nil {
		return fmt.Errorf("campaign: check audience: %w", err)
	}
	return nil
}

// Limit is what the caller may address through app: the picker lists
// only that. Everyone for a caller who is not kept to an audience.
func (s *Service) Limit(ctx context.Context, p *access.Principal, app yidu.App) (access.Limit, error) {
	if _, limited := p.SenderAudience(app.CorpID, app.Name); !limited || s.o.Audiences == nil {
		if limited {
			return access.Limit{}, &AudienceError{Field: "audience", Reason: "your role is kept to an audience this server cannot check"}
		}
		return access.Anyone, nil
	}
	l, err := s.o.Audiences.Limit(ctx, p, app.CorpID, app.Name)
	if err != nil {
		return access.Limit{}, fmt.Errorf("campaign: audience limit: %w", err)
	}
	return l, nil
}

// DefaultFollowUp is the follow-up policy a new notice of app gets when
// its request named none (set false): the app's apps[].follow_up, when
// the server runs rounds. nil: none.
func (s *Service) DefaultFollowUp(app yidu.App, set bool) *yidu.Policy {
	if set || app.FollowUp == nil || s.o.Rounds == nil {
		return nil
	}
	p := *app.FollowUp
	return &p
}

// CheckFollowUp checks a posted policy for a notice sent at sendAt before
// anything is sent or stored; nil p is no policy. The error names the
// field inside follow_up.
func (s *Service) CheckFollowUp(p *yidu.Policy, sendAt time.Time) error {
	if p == nil {
		return nil
	}
	if s.o.Rounds == nil {
		return ErrNoFollowUps
	}
	return InFollowUp(s.o.Rounds.CheckPolicy(*p, sendAt))
}

// Compose is a new draft or scheduled notice, stored with its follow-up
// policy in one transaction: the posted one, else the app's default
// (followUpSet: the request named one, null included).
type Compose struct {
	Draft       Draft
	FollowUp    *yidu.Policy
	FollowUpSet bool
}

// Compose stores a draft or a scheduled notice for the caller, who must
// be allowed to send through its app; the notice and its follow-up
// policy are written in one transaction, so a failure between them
// leaves neither.
func (s *Service) Compose(ctx context.Context, p *access.Principal, c Compose) (Notice, error) {
	if s.o.Store == nil {
		return Notice{}, ErrNoCampaigns
	}
	app := c.Draft.App
	if err := s.CheckAudience(ctx, p, app, c.Draft.Audience); err != nil {
		return Notice{}, err
	}
	if !c.Draft.Schedule.Draft && c.Draft.Schedule.SendAt.IsZero() {
		return Notice{}, yidu.Invalidf("send_at is required unless draft")
	}
	pol := c.FollowUp
	if d := s.DefaultFollowUp(app, c.FollowUpSet); d != nil {
		pol = d
	}
	// A draft's policy is checked against now; the deadline of one sent
	// later than that is the deadline (plan stops it).
	sendAt := cmp.Or(c.Draft.Schedule.SendAt, s.o.Now())
	if err := s.CheckFollowUp(pol, sendAt); err != nil {
		return Notice{}, err
	}
	c.Draft.By = p.Name
	// Its full text is checked now and kept with it, published as
	// version 1 when it is sent (issue 39).
	if err := s.checkDraftContent(ctx, &c.Draft); err != nil {
		return Notice{}, err
	}
	n, err := s.compose(ctx, p, c.Draft, pol, sendAt)
	if err != nil || n.State == yidu.StateDraft {
		return n, err
	}
	// A scheduled notice that needs approval waits for it (issue 41).
	n, _, err = s.review(ctx, p, n, false)
	return n, err
}

func (s *Service) compose(ctx context.Context, p *access.Principal, d Draft, pol *yidu.Policy, sendAt time.Time) (Notice, error) {
	app := d.App
	if pol == nil {
		return s.o.Store.create(ctx, d, nil)
	}
	rounds, ok := s.o.Rounds.(*Rounds)
	if !ok {
		// A test's fake keeps policies elsewhere: stored after the notice.
		n, err := s.o.Store.create(ctx, d, nil)
		if err != nil {
			return n, err
		}
		return n, InFollowUp(s.o.Rounds.StorePolicy(ctx, app.CorpID, n.MsgID, *pol, sendAt, p.Name))
	}
	return s.o.Store.create(ctx, d, func(ctx context.Context, tx execer, d Draft) error {
		return InFollowUp(rounds.storePolicy(ctx, tx, app.CorpID, d.MsgID, *pol, sendAt, p.Name))
	})
}

// Edit changes a draft, scheduled or held notice of the caller's app,
// and with pol its follow-up policy, checked against the send time the
// edit leaves (now for a draft) before anything is written. A notice
// campaign already sent takes a policy and nothing else.
func (s *Service) Edit(ctx context.Context, p *access.Principal, n Notice, patch Patch, pol *yidu.Policy) (Notice, error) {
	if s.o.Store == nil {
		return Notice{}, ErrNoCampaigns
	}
	if err := mustSend(p, n.App.CorpID, n.App.Name, "change this notice"); err != nil {
		return Notice{}, err
	}
	au := n.Audience
	if patch.Audience != nil {
		au = *patch.Audience
	}
	if err := s.CheckAudience(ctx, p, n.App, au); err != nil {
		return Notice{}, err
	}
	patch.By = p.Name
	if err := mergeKept(n, &patch); err != nil {
		return Notice{}, err
	}
	if err := s.patchContent(ctx, n, &patch); err != nil {
		return Notice{}, err
	}
	ed, err := s.edit(ctx, p, n, patch, pol)
	if err != nil || ed.State != yidu.StateScheduled && ed.State != yidu.StateHeld {
		return ed, err
	}
	// Any edit after approval needs approval again (issue 41).
	ed, _, err = s.review(ctx, p, ed, false)
	return ed, err
}

func (s *Service) edit(ctx context.Context, p *access.Principal, n Notice, patch Patch, pol *yidu.Policy) (Notice, error) {
	if pol == nil {
		return s.o.Store.Edit(ctx, []string{n.App.CorpID}, n.MsgID, patch)
	}
	if s.o.Rounds == nil {
		return Notice{}, ErrNoFollowUps
	}
	empty := patch.Title == nil && patch.Body == nil && patch.URL == nil && patch.Audience == nil && patch.Schedule == nil && patch.Content == nil
	if n.State == yidu.StateSent {
		if !empty {
			return Notice{}, fmt.Errorf("%w: %s is sent; only follow_up can change", ErrNotEditable, n.MsgID)
		}
		if err := s.o.Rounds.SetPolicy(ctx, n.App.CorpID, n.MsgID, *pol, p.Name); err != nil {
			return Notice{}, InFollowUp(err)
		}
		return n, nil
	}
	if !n.State.Editable() {
		return Notice{}, fmt.Errorf("%w: %s is %s", ErrNotEditable, n.MsgID, n.State)
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
		return Notice{}, InFollowUp(err)
	}
	if !empty {
		ed, err := s.o.Store.Edit(ctx, []string{n.App.CorpID}, n.MsgID, patch)
		if err != nil {
			return Notice{}, err
		}
		n = ed
	}
	if err := s.o.Rounds.StorePolicy(ctx, n.App.CorpID, n.MsgID, *pol, sendAt, p.Name); err != nil {
		return Notice{}, InFollowUp(err)
	}
	return n, nil
}

// patchContent checks the full text an edit leaves n keeping (its own,
// or the patch's) before anything is written, and keeps its card linked
// to its reading page. A sent notice's content changes by Revision.
func (s *Service) patchContent(ctx context.Context, n Notice, patch *Patch) error {
	if patch.Content == nil && (n.Content == nil || patch.Title == nil && patch.URL == nil) {
		return nil
	}
	if patch.Content != nil && !n.State.Editable() {
		return fmt.Errorf("%w: %s is %s; its content changes by a new version", ErrNotEditable, n.MsgID, n.State)
	}
	d := Draft{MsgID: n.MsgID, App: n.App, Title: n.Title, URL: n.URL, Content: n.Content}
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
func mergeKept(n Notice, patch *Patch) error {
	if patch.Content == nil && patch.ReadRule == nil && patch.MinReadSeconds == nil {
		return nil
	}
	if patch.Content == nil && n.Content == nil {
		return yidu.Invalidf("read_rule: a notice without content has the app's rule")
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
func (s *Service) Cancel(ctx context.Context, p *access.Principal, n Notice) (Notice, error) {
	if s.o.Store == nil {
		return Notice{}, ErrNoCampaigns
	}
	if err := mustSend(p, n.App.CorpID, n.App.Name, "cancel this notice"); err != nil {
		return Notice{}, err
	}
	return s.o.Store.Cancel(ctx, []string{n.App.CorpID}, n.MsgID, p.Name)
}

// SendNow makes a draft, scheduled or held notice of the caller's app due
// now; the Runner sends it once. Of concurrent requests one makes it due,
// the others are ErrNotEditable (it is already being sent).
func (s *Service) SendNow(ctx context.Context, p *access.Principal, n Notice) (Notice, error) {
	if s.o.Store == nil {
		return Notice{}, ErrNoCampaigns
	}
	if err := s.CheckAudience(ctx, p, n.App, n.Audience); err != nil {
		return Notice{}, err
	}
	// A notice that needs approval and has none for this version waits
	// for it, and is sent when approved (issue 41).
	if !n.State.Editable() {
		return Notice{}, fmt.Errorf("%w: %s is %s", ErrNotEditable, n.MsgID, n.State)
	}
	n, ok, err := s.review(ctx, p, n, true)
	if err != nil || !ok {
		return n, err
	}
	return s.o.Store.SendNow(ctx, []string{n.App.CorpID}, n.MsgID, p.Name)
}

// MayFollowUp says whether p may change m's follow-up (ErrForbidden), and
// whether the server runs follow-ups (ErrNoFollowUps): the dashboard asks
// before it reads the body, so a caller without the right learns nothing
// from the body's errors.
func (s *Service) MayFollowUp(p *access.Principal, m yidu.Message) error {
	if err := mustSend(p, m.CorpID, m.App, "manage this notice's follow-up"); err != nil {
		return err
	}
	if s.o.Rounds == nil {
		return ErrNoFollowUps
	}
	return nil
}

// FollowUpOf is m's follow-up policy and rounds as the notice's own
// answer shows them; found false when it has none or the server runs no
// rounds.
func (s *Service) FollowUpOf(ctx context.Context, m yidu.Message) (FollowUp, bool, error) {
	if s.o.Rounds == nil {
		return FollowUp{}, false, nil
	}
	fu, ok, err := s.o.Rounds.FollowUpOf(ctx, m.CorpID, m.MsgID)
	if err != nil {
		return FollowUp{}, false, fmt.Errorf("campaign: follow-up of %s: %w", m.MsgID, err)
	}
	return fu, ok, nil
}

// FollowUp is m's follow-up for p, who must manage it (MayFollowUp) and
// see the whole notice (whole: the rounds count every unread recipient,
// more than a scoped View holds).
func (s *Service) FollowUp(ctx context.Context, p *access.Principal, m yidu.Message, whole bool) (FollowUp, bool, error) {
	if !whole {
		return FollowUp{}, false, fmt.Errorf("%w: your role may not manage this notice's follow-up", ErrForbidden)
	}
	if err := s.MayFollowUp(p, m); err != nil {
		return FollowUp{}, false, err
	}
	return s.FollowUpOf(ctx, m)
}

// SetFollowUp sets or changes the follow-up policy of a sent notice of the
// caller's app (the whole notice's: rounds to every unread recipient).
func (s *Service) SetFollowUp(ctx context.Context, p *access.Principal, m yidu.Message, pol yidu.Policy) error {
	if err := s.MayFollowUp(p, m); err != nil {
		return err
	}
	return s.o.Rounds.SetPolicy(ctx, m.CorpID, m.MsgID, pol, p.Name)
}

// StoreFollowUp stores the follow-up policy of a notice the caller just
// registered (sent now): the posted one, or the app's default.
func (s *Service) StoreFollowUp(ctx context.Context, p *access.Principal, m yidu.Message, pol yidu.Policy) error {
	if err := mustSend(p, m.CorpID, m.App, "manage this notice's follow-up"); err != nil {
		return err
	}
	if s.o.Rounds == nil {
		return ErrNoFollowUps
	}
	if m.Recalled() {
		return yidu.Invalidf("follow_up: the notice was recalled")
	}
	return InFollowUp(s.o.Rounds.StorePolicy(ctx, m.CorpID, m.MsgID, pol, m.SentAt, p.Name))
}

// CancelRound stops the notice's current round; false when none is due
// or sending.
func (s *Service) CancelRound(ctx context.Context, p *access.Principal, m yidu.Message) (bool, error) {
	if err := s.MayFollowUp(p, m); err != nil {
		return false, err
	}
	return s.o.Rounds.CancelRound(ctx, m.CorpID, m.MsgID)
}

// Remind is a manual reminder ("Remind unread") of a sent notice.
type Remind struct {
	Caller  *access.Principal
	Message yidu.Message
}

// RemindReport is what a reminder did.
type RemindReport struct {
	yidu.RemindReport
	// Unread is how many unread people the reminder was for (in the
	// caller's scope, not reminded within the interval, members who left
	// excluded); Skipped those who could not be addressed.
	Unread, Skipped int
	// NextAllowedAt is when the people reminded now may be reminded again.
	NextAllowedAt time.Time
	// Scope is "all" (a sender's reminder) or "led" (a leader's).
	Scope string
}

// Remind sends a reminder card to the unread people in the caller's scope
// (a sender of the app or an admin: every unread person; a department
// leader: the unread people of the subtrees it leads) who were not
// reminded within the interval, by hand or by a round. The notice is
// claimed in MySQL first (ErrBusy while another reminder or recall of it
// runs, on any replica), and the people are recorded before the cards
// leave, so any number of requests on any number of replicas remind each
// person once per interval. When everyone unread in scope was reminded
// within the interval, the error is a *TooSoonError.
func (s *Service) Remind(ctx context.Context, r Remind) (RemindReport, error) {
	p, m := r.Caller, r.Message
	v, scope, err := s.remindView(ctx, p, m)
	if err != nil {
		return RemindReport{}, err
	}
	if m.Recalled() {
		return RemindReport{}, fmt.Errorf("%w: %s", yidu.ErrRecalled, m.MsgID)
	}
	if s.o.Ledger == nil || s.o.Readers == nil {
		return RemindReport{}, ErrNoLedger
	}
	if err := s.remindInside(ctx, p, m); err != nil {
		return RemindReport{}, err
	}
	release, ok, err := s.o.Ledger.Claim(ctx, m.CorpID, m.MsgID, "remind")
	if err != nil {
		return RemindReport{}, err
	}
	if !ok {
		return RemindReport{}, ErrBusy
	}
	defer release()
	unread, err := s.o.Readers.Unread(ctx, m, v)
	if err != nil {
		return RemindReport{}, err
	}
	now := s.o.Now().UTC().Truncate(time.Millisecond)
	iv := s.o.RemindInterval
	recent, err := s.o.Ledger.Reminded(ctx, m.CorpID, m.MsgID, now.Add(-iv))
	if err != nil {
		return RemindReport{}, err
	}
	due := unread.Clone()
	var next time.Time
	for uid, at := range recent {
		if due.Contains(uid) {
			due.Remove(uid)
			if n := at.Add(iv); next.IsZero() || n.Before(next) {
				next = n
			}
		}
	}
	users, skipped, err := s.o.Readers.UserIDs(ctx, m.CorpID, due)
	if err != nil {
		return RemindReport{}, err
	}
	if len(users) == 0 && !next.IsZero() {
		return RemindReport{}, &TooSoonError{Next: next}
	}
	rep := RemindReport{Unread: len(users) + skipped, Skipped: skipped, NextAllowedAt: now.Add(iv), Scope: scope}
	if len(users) == 0 {
		rep.NextAllowedAt = now
		return rep, nil
	}
	uids := make([]uint32, 0, len(users))
	ids := make([]string, 0, len(users))
	for uid, id := range users {
		uids = append(uids, uid)
		ids = append(ids, id)
	}
	slices.Sort(uids)
	if err := s.o.Ledger.Record(ctx, m.CorpID, m.MsgID, now, p.Name, scope, uids); err != nil {
		return RemindReport{}, err
	}
	sent, err := s.o.Messenger.Remind(ctx, m, ids)
	if err != nil {
		if sent.Batches == 0 {
			// Nothing left: the people are not reminded, and the interval
			// does not hold them.
			if uerr := s.o.Ledger.Unrecord(context.WithoutCancel(ctx), m.CorpID, m.MsgID, now); uerr != nil {
				s.log.Warn("reminder not sent, its record kept", "corp", m.CorpID, "msgid", m.MsgID, "err", uerr)
			}
		}
		return RemindReport{}, fmt.Errorf("campaign: remind: %w", err)
	}
	rep.RemindReport = sent
	rep.Skipped += sent.BadUserIDs + sent.Missing
	s.log.InfoContext(ctx, "reminder sent", "corp", m.CorpID, "msgid", m.MsgID, "scope", scope,
		"reminded", sent.Reminded, "refused", sent.Refused, "unknown", sent.Unknown, "skipped", rep.Skipped, "by", p.Name)
	return rep, nil
}

// remindInside refuses a reminder by a sender kept to an audience when
// an unread recipient of the notice is outside it: the reminder would
// reach people the sender may not address. A department leader's
// reminder is kept to its subtrees by remindView and is not a sender's.
func (s *Service) remindInside(ctx context.Context, p *access.Principal, m yidu.Message) error {
	if !p.MaySend(m.CorpID, m.App) {
		return nil
	}
	if _, limited := p.SenderAudience(m.CorpID, m.App); !limited {
		return nil
	}
	l, err := s.Limit(ctx, p, yidu.App{CorpID: m.CorpID, Name: m.App})
	if err != nil {
		return err
	}
	inside, err := l.Members(ctx)
	if err != nil {
		return fmt.Errorf("campaign: audience members: %w", err)
	}
	all, err := s.o.Readers.Unread(ctx, m, access.Everyone)
	if err != nil {
		return err
	}
	if out := all.GetCardinality() - all.AndCardinality(inside); out > 0 {
		return &AudienceError{Field: "audience", Reason: fmt.Sprintf("%d unread recipients of this notice are outside the audience your role may send to", out)}
	}
	return nil
}

// remindView is whom p may remind of m and whose reminder it is: "all"
// for a sender of the app or an admin, "led" for a department leader
// (access decides); ErrForbidden for anyone else (a viewer reads only).
func (s *Service) remindView(ctx context.Context, p *access.Principal, m yidu.Message) (access.View, string, error) {
	if p == nil {
		return access.View{}, "", fmt.Errorf("%w: your role may not remind through this app", ErrForbidden)
	}
	if p.MaySend(m.CorpID, m.App) {
		return access.Everyone, "all", nil
	}
	if s.o.Scope == nil || !p.MayRemindScoped(m.CorpID, m.App) {
		return access.View{}, "", fmt.Errorf("%w: your role may not remind through this app", ErrForbidden)
	}
	v, err := s.o.Scope.RemindView(ctx, p, m.CorpID, m.App)
	if err != nil {
		return access.View{}, "", fmt.Errorf("campaign: remind scope: %w", err)
	}
	if v.None() {
		return access.View{}, "", fmt.Errorf("%w: your role may not remind through this app", ErrForbidden)
	}
	if v.All() {
		return v, "all", nil
	}
	return v, "led", nil
}

// Recall is a recall of a sent notice.
type Recall struct {
	Caller  *access.Principal
	Message yidu.Message
}

// Recall recalls every card of the notice (the caller must be allowed to
// send through its app), claimed in MySQL as a reminder is: one recall
// or reminder of a notice runs at a time across replicas (ErrBusy), so a
// recall never misses a reminder's batches and WeCom is asked once.
func (s *Service) Recall(ctx context.Context, r Recall) (RecallReport, error) {
	m := r.Message
	if err := mustSend(r.Caller, m.CorpID, m.App, "recall"); err != nil {
		return RecallReport{}, err
	}
	if s.o.Ledger == nil || s.o.Readers == nil {
		return RecallReport{}, ErrNoLedger
	}
	release, ok, err := s.o.Ledger.Claim(ctx, m.CorpID, m.MsgID, "recall")
	if err != nil {
		return RecallReport{}, err
	}
	if !ok {
		return RecallReport{}, ErrBusy
	}
	defer release()
	read, err := s.o.Readers.ReadNow(ctx, m)
	if err != nil {
		return RecallReport{}, err
	}
	rep, err := s.o.Messenger.Recall(ctx, m, read)
	return RecallReport{RecallReport: rep, Read: read}, err
}

// RecallReport is what a recall did, with the read count it froze.
type RecallReport struct {
	yidu.RecallReport
	Read int64
}

// Reconfirmer sends the 通知已更新，请重新确认 card (tracker.Registry); a
// Messenger that is one can ask acknowledgers to confirm a material
// version (issue 39).
type Reconfirmer interface {
	Reconfirm(ctx context.Context, m yidu.Message, userIDs []string) (yidu.RemindReport, error)
}

// Reconfirmables lists who acknowledged an earlier version and was not
// yet sent version's update card (SQLLedger.Reconfirmable).
type Reconfirmables interface {
	Reconfirmable(ctx context.Context, corpID, msgID string, version int) (map[uint32]string, error)
}

// Reconfirm sends each member who acknowledged a version of m older than
// version (a material one, under read_rule acknowledged) one card
// 通知已更新，请重新确认, once across replicas: the notice is claimed in
// MySQL (ErrBusy while another act holds it), and the people are recorded
// (manual_reminders, scope "reack:v<version>") before the cards leave, so
// a second call, on any replica, finds nobody left. It returns how many
// were sent the card. A Messenger or Ledger that cannot do it: 0, nil.
func (s *Service) Reconfirm(ctx context.Context, m yidu.Message, version int, by string) (int, error) {
	rc, ok1 := s.o.Messenger.(Reconfirmer)
	who, ok2 := s.o.Ledger.(Reconfirmables)
	if !ok1 || !ok2 || m.Recalled() {
		return 0, nil
	}
	release, ok, err := s.o.Ledger.Claim(ctx, m.CorpID, m.MsgID, "reconfirm")
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, ErrBusy
	}
	defer release()
	people, err := who.Reconfirmable(ctx, m.CorpID, m.MsgID, version)
	if err != nil || len(people) == 0 {
		return 0, err
	}
	uids := make([]uint32, 0, len(people))
	ids := make([]string, 0, len(people))
	for uid, id := range people {
		uids = append(uids, uid)
		ids = append(ids, id)
	}
	slices.Sort(uids)
	now := s.o.Now().UTC().Truncate(time.Millisecond)
	if err := s.o.Ledger.Record(ctx, m.CorpID, m.MsgID, now, by, reconfirmScope(version), uids); err != nil {
		return 0, err
	}
	sent, err := rc.Reconfirm(ctx, m, ids)
	if err != nil {
		if sent.Batches == 0 {
			if uerr := s.o.Ledger.Unrecord(context.WithoutCancel(ctx), m.CorpID, m.MsgID, now); uerr != nil {
				s.log.Warn("update card not sent, its record kept", "corp", m.CorpID, "msgid", m.MsgID, "err", uerr)
			}
		}
		return 0, fmt.Errorf("campaign: reconfirm: %w", err)
	}
	s.log.InfoContext(ctx, "update card sent", "corp", m.CorpID, "msgid", m.MsgID, "version", version, "reminded", sent.Reminded, "by", by)
	return sent.Reminded, nil
}
