package campaign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
)

// The gate (issue 46). Two questions decide every act on a notice, and
// each is one function here that every path asks:
//
//   - authorize: may this caller do this act to this notice? Its role
//     (a sender of the app or an admin; for a reminder, a department
//     leader too, kept to its people), and, for a sender kept to an
//     audience, whether everyone the act reaches is inside it.
//   - mayReach: may the notice reach people at all? Not recalled, and,
//     when its app asks approval (apps[].approval) for it, approved in
//     the version people would see.
//
// Send, send now and a scheduled notice at its time ask mayReach's
// question through review and AtItsTime (a notice not yet sent waits for
// approval of its version, bound to ApprovalHash); remind, the follow-up
// rounds and their escalation digests, the update card and a revision
// ask mayReach of the sent message. A sent notice's live version is
// always an approved one: its first was approved before the Runner sent
// it, and a material revision of a notice under approval is held as a
// new version that is published only once approved (holdRevision,
// publishRevision). A message registered without send (a draft: yidu
// never sent it) that its app would ask approval for has no approved
// version, so yidu sends it nothing.

// Verb is an act on a notice that authorize decides.
type Verb string

// The acts authorize decides (docs/api.md, "The gate").
const (
	VerbSend      Verb = "send"      // POST /messages with send, now or at send_at
	VerbSendNow   Verb = "send now"  // POST …/send
	VerbEdit      Verb = "edit"      // PATCH of a notice not yet sent
	VerbCancel    Verb = "cancel"    // POST …/cancel
	VerbRemind    Verb = "remind"    // POST …/remind
	VerbRecall    Verb = "recall"    // POST …/recall
	VerbFollowUp  Verb = "follow-up" // PUT …/follow_up, cancel-round, GET
	VerbRevise    Verb = "revise"    // PATCH of a sent notice: its next version
	VerbReconfirm Verb = "reconfirm" // the update card after a material version
)

// Action is the audit action of act: the row its refusal or its doing
// is due (refusedAct).
func (v Verb) Action() yidu.Action {
	switch v {
	case VerbSend, VerbSendNow:
		return yidu.ActionSend
	case VerbCancel:
		return yidu.ActionCancel
	case VerbRemind:
		return yidu.ActionRemind
	case VerbRecall:
		return yidu.ActionRecall
	case VerbFollowUp:
		return yidu.ActionFollowUpChange
	}
	return yidu.ActionEdit // edit, revise, and the update card of a revision
}

// refusedAct is the audit row due for act on msgID refused with err:
// a refusal leaves its row as a deed does (issue 46).
func refusedAct(act Verb, msgID string, err error) Act {
	return Act{Action: act.Action(), MsgID: msgID, Err: err, Detail: string(act)}
}

// ErrNotApproved: the notice may not reach anyone (the dashboard's 409):
// its app asks approval for it and the version people would see is not
// approved. It wraps ErrApproval.
var ErrNotApproved = fmt.Errorf("%w: not approved", ErrApproval)

// Target is what an act is on: a notice not yet sent (its audience as
// asked) or a registered message (its recipients as snapshotted).
type Target struct {
	CorpID, App string
	// Audience is a notice's audience as asked; nil for a message.
	Audience *yidu.Audience
	// Message is the registered message; nil for a notice not yet sent.
	Message *yidu.Message
}

// NoticeTarget is n as an act's target.
func NoticeTarget(n yidu.Notice) Target {
	au := n.Audience
	return Target{CorpID: n.App.CorpID, App: n.App.Name, Audience: &au}
}

// MessageTarget is m as an act's target.
func MessageTarget(m yidu.Message) Target {
	return Target{CorpID: m.CorpID, App: m.App, Message: &m}
}

// authorize decides whether p may do act to t, fail-closed: no caller,
// an unknown act, a role that does not allow it, or a sender kept to an
// audience the act would reach beyond (or that cannot be checked) is
// refused with ErrForbidden (an *AudienceError naming the field for the
// audience). It writes nothing.
func (s *Service) authorize(ctx context.Context, act Verb, p *access.Principal, t Target) error {
	if p == nil {
		return fmt.Errorf("%w: %s needs a signed-in caller", ErrForbidden, act)
	}
	switch act {
	case VerbSend, VerbSendNow, VerbEdit, VerbCancel, VerbRemind, VerbRecall, VerbFollowUp, VerbRevise, VerbReconfirm:
	default:
		return fmt.Errorf("%w: unknown act %q", ErrForbidden, act)
	}
	// What p is, here, is access's: whether it is kept to an audience,
	// and the role's rule, one function per act.
	_, limited := p.SenderAudience(t.CorpID, t.App)
	if !access.Decide(p, act.Action(), access.Target{Corp: t.CorpID, App: t.App}).Allowed {
		return fmt.Errorf("%w: your role may not %s through this app", ErrForbidden, act)
	}
	if act == VerbRemind && !p.MaySend(t.CorpID, t.App) {
		// A department leader reminds its own people (remindView keeps
		// it to them), where a scope can be resolved.
		if s.o.Scope == nil {
			return fmt.Errorf("%w: your role may not remind through this app", ErrForbidden)
		}
		return nil
	}
	if !limited {
		return nil
	}
	return s.inside(ctx, act, p, t)
}

// inside refuses an act of a sender kept to an audience (authorize asked)
// that would reach someone outside it: a notice's audience as asked, else
// the message's recipients (for a reminder, those it would remind: the
// unread ones).
func (s *Service) inside(ctx context.Context, act Verb, p *access.Principal, t Target) error {
	if t.Audience != nil {
		return s.audienceInside(ctx, p, t.CorpID, t.App, *t.Audience)
	}
	if t.Message == nil {
		return &AudienceError{Field: "audience", Reason: "the notice's recipients cannot be checked against your role's audience"}
	}
	l, err := s.limit(ctx, p, t.CorpID, t.App)
	if err != nil {
		return err
	}
	reach, err := s.reachOf(ctx, act, *t.Message)
	if err != nil {
		return err
	}
	in, err := l.Members(ctx)
	if err != nil {
		return fmt.Errorf("campaign: audience members: %w", err)
	}
	if out := reach.GetCardinality() - reach.AndCardinality(in); out > 0 {
		what := "recipients"
		if act == VerbRemind {
			what = "unread recipients"
		}
		return &AudienceError{Field: "audience", Reason: fmt.Sprintf("%d %s of this notice are outside the audience your role may send to", out, what)}
	}
	return nil
}

// recipientSets gives a message's recipients (progress.Progress.Bitmaps).
type recipientSets interface {
	Bitmaps(ctx context.Context, m yidu.Message, v access.View) (rec, readRec *roaring.Bitmap, err error)
}

// reachOf is whom act on m reaches: the unread recipients for a
// reminder, every recipient otherwise. Without a way to tell, it fails
// (closed).
func (s *Service) reachOf(ctx context.Context, act Verb, m yidu.Message) (*roaring.Bitmap, error) {
	if s.o.Readers == nil {
		return nil, &AudienceError{Field: "audience", Reason: "your role is kept to an audience this server cannot check"}
	}
	if act == VerbRemind {
		return s.o.Readers.Unread(ctx, m, access.Everyone)
	}
	rs, ok := s.o.Readers.(recipientSets)
	if !ok {
		return nil, &AudienceError{Field: "audience", Reason: "your role is kept to an audience this server cannot check"}
	}
	rec, _, err := rs.Bitmaps(ctx, m, access.Everyone)
	if err != nil {
		return nil, fmt.Errorf("campaign: recipients of %s: %w", m.MsgID, err)
	}
	return rec, nil
}

// Messages finds a registered message (tracker.Registry.GetMessage): the
// rounds' gate asks by msgid.
type Messages interface {
	GetMessage(ctx context.Context, corps []string, msgID string) (yidu.Message, bool, error)
}

// MayReach is mayReach of the registered message msgID of corp: the
// follow-up rounds (Rounds.Gate) ask it before each round and its
// escalation digests. yidu.ErrNotFound when no such message is known.
func (s *Service) MayReach(ctx context.Context, corp, msgID string) error {
	if s.o.Messages == nil {
		return fmt.Errorf("%w: %s: this server cannot look the message up to check it", ErrNotApproved, msgID)
	}
	m, ok, err := s.o.Messages.GetMessage(ctx, []string{corp}, msgID)
	if err != nil {
		return fmt.Errorf("campaign: message %s: %w", msgID, err)
	}
	if !ok {
		return fmt.Errorf("%w: %s", yidu.ErrNotFound, msgID)
	}
	return s.mayReach(ctx, m)
}

// RoundGate is the follow-up rounds' gate (loops.Rounds.Gate): a round
// of a notice MayReach refuses as not approved waits (wait true), one of
// a recalled message goes on (the rounds stop it themselves), any other
// refusal is an error.
func (s *Service) RoundGate(ctx context.Context, corp, msgID string) (wait bool, err error) {
	err = s.MayReach(ctx, corp, msgID)
	switch {
	case errors.Is(err, ErrApproval):
		return true, nil
	case err != nil && !errors.Is(err, yidu.ErrRecalled):
		return false, err
	}
	return false, nil
}

// mayReach decides whether yidu may send m's people anything (a
// reminder, a round, a digest, an update card, a new version): not
// recalled, and approved when its app asks approval for it. A message
// yidu sent from a notice (a campaigns row in state sent or sending)
// carries an approved live version, or needed none (see the package's
// gate comment); a message without one is judged by its snapshot
// (recipients, read rule): needing approval, it passes only if yidu
// sent its card (POST /messages with send, when its app asked none:
// the rule was tightened since), and a draft registered without send is
// refused: it never had any.
func (s *Service) mayReach(ctx context.Context, m yidu.Message) error {
	if m.Recalled() {
		return fmt.Errorf("%w: %s", yidu.ErrRecalled, m.MsgID)
	}
	if s.st == nil {
		return nil // no approvals kept: none configured to check
	}
	app, ok := s.st.App(m.App)
	if !ok || app.Approval == nil || app.CorpID != m.CorpID {
		return nil
	}
	n, err := s.st.Get(ctx, []string{m.CorpID}, m.MsgID)
	switch {
	case err == nil:
		if n.State == yidu.StateSent || n.State == yidu.StateSending || n.Approval == yidu.ApprovalApproved {
			return nil
		}
		need, _, err := s.NeedsApproval(ctx, n)
		if err != nil {
			return err
		}
		if need {
			return fmt.Errorf("%w: %s is %s and not approved in its current version (待审批)", ErrNotApproved, m.MsgID, n.State)
		}
		return nil
	case !errors.Is(err, yidu.ErrNotFound):
		return fmt.Errorf("campaign: notice %s: %w", m.MsgID, err)
	}
	if !app.Approval.Needs(uint64(max(m.Recipients, 0)), false, m.ReadRule) {
		return nil
	}
	sent, err := s.sentByYidu(ctx, m)
	if err != nil || sent {
		// Sent through POST /messages with send when its app asked no
		// approval for it (the rule was tightened since): not a draft.
		return err
	}
	return fmt.Errorf("%w: %s was registered without send (a draft) and its app asks approval for it (apps[].approval); "+
		"yidu sends it no reminder, follow-up round or update card: register it with \"send\": true to ask approval", ErrNotApproved, m.MsgID)
}

// sendReports gives a message's send batches (progress.Progress.Outcomes).
type sendReports interface {
	Outcomes(ctx context.Context, m yidu.Message) ([]yidu.BatchOutcome, error)
}

// sentByYidu says whether yidu sent m's card (a batch of the notice's
// own, not a reminder's); without a way to tell, no (fail-closed).
func (s *Service) sentByYidu(ctx context.Context, m yidu.Message) (bool, error) {
	sr, ok := s.o.Readers.(sendReports)
	if !ok {
		return false, nil
	}
	outs, err := sr.Outcomes(ctx, m)
	if err != nil {
		return false, fmt.Errorf("campaign: sends of %s: %w", m.MsgID, err)
	}
	for _, o := range outs {
		if !o.Reminder {
			return true, nil
		}
	}
	return false, nil
}

// gate is authorize then mayReach: the question every act that reaches
// people asks of a sent message.
func (s *Service) gate(ctx context.Context, act Verb, p *access.Principal, m yidu.Message) error {
	if err := s.authorize(ctx, act, p, MessageTarget(m)); err != nil {
		return err
	}
	return s.mayReach(ctx, m)
}

// mustSend refuses a caller who may not send through app (an admin of the
// corp or a sender of the app may).
func mustSend(p *access.Principal, corp, app, what string) error {
	if !access.Decide(p, yidu.ActionSend, access.Target{Corp: corp, App: app}).Allowed {
		return fmt.Errorf("%w: your role may not %s through this app", ErrForbidden, what)
	}
	return nil
}

// CheckAudience refuses, with an *AudienceError naming the field, an
// audience of app that the caller may not address (issue 41: a sender
// kept to some departments and tags), and a caller who may not send
// through app at all. It is authorize's decision for a send, and
// writes nothing; compose, edit, send now, a scheduled notice at its
// time and the dashboard's preview and registration call it before
// anything is stored or sent.
func (s *Service) CheckAudience(ctx context.Context, p *access.Principal, app yidu.App, au yidu.Audience) error {
	return s.authorize(ctx, VerbSend, p, Target{CorpID: app.CorpID, App: app.Name, Audience: &au})
}

// audienceInside refuses an audience au of app outside what a sender
// kept to an audience may address; without Audiences it fails closed.
func (s *Service) audienceInside(ctx context.Context, p *access.Principal, corp, app string, au yidu.Audience) error {
	if s.o.Audiences == nil {
		return &AudienceError{Field: "audience", Reason: "your role is kept to an audience this server cannot check"}
	}
	m, key := memoOf(ctx), ""
	if m != nil {
		key = audienceKey(p, corp, app, au)
		if err, ok := m.checked(key); ok {
			return err
		}
	}
	err := audienceErr(s.o.Audiences.CheckAudience(ctx, p, corp, app, au))
	if ctx.Err() == nil {
		m.check(key, err)
	}
	return err
}

// audienceKey names audience au of corp's app and the caller p within a
// memo.
func audienceKey(p *access.Principal, corp, app string, au yidu.Audience) string {
	b, err := json.Marshal(au)
	if err != nil {
		return "" // never: an Audience is plain data; "" is never remembered
	}
	who := ""
	if p != nil {
		who = string(p.Kind) + ":" + p.Name
	}
	return who + "\x00" + corp + "\x00" + app + "\x00" + string(b)
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
	if _, limited := p.SenderAudience(app.CorpID, app.Name); !limited {
		return access.Anyone, nil
	}
	return s.limit(ctx, p, app.CorpID, app.Name)
}

// limit is what a caller kept to an audience may address through app of
// corp; without Audiences it fails closed.
func (s *Service) limit(ctx context.Context, p *access.Principal, corp, app string) (access.Limit, error) {
	if s.o.Audiences == nil {
		return access.Limit{}, &AudienceError{Field: "audience", Reason: "your role is kept to an audience this server cannot check"}
	}
	l, err := s.o.Audiences.Limit(ctx, p, corp, app)
	if err != nil {
		return access.Limit{}, fmt.Errorf("campaign: audience limit: %w", err)
	}
	return l, nil
}
