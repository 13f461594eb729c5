package campaign

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/campaign/store"
	noticev "github.com/yidu-io/yidu/notice"
)

// Approval before sending (issue 41). An app's apps[].approval makes a
// notice that reaches more than `over` people, 全员, or asks for an
// acknowledgement wait for another person's approval of its version.
// Campaign decides: whether a notice needs it, who may approve, which
// version is approved (ApprovalHash), and that an approved notice is
// sent once however often and wherever the approval is pressed: the
// decision is one conditional UPDATE of the notice's row (pending →
// approved, for that version), so a second press, on any replica,
// changes nothing; the Runner then claims the notice as any other.

// ErrApproval: the notice's approval forbids the act (the dashboard's
// 409): the version changed since it was shown, it was decided already
// otherwise, or it is not waiting for approval.
var ErrApproval = errors.New("approval")

// ErrOwnNotice: nobody approves or rejects their own notice (403).
var ErrOwnNotice = fmt.Errorf("%w: nobody approves their own notice", ErrForbidden)

// Versions gives a notice's current content version (notice.Store): its
// hash and read rule are part of what is approved.
type Versions interface {
	Get(ctx context.Context, corp, msgid string, n int) (noticev.Version, error)
}

// ApprovalNotifier tells people of approvals (the WeCom card with 批准 /
// 驳回 to the approvers; a text to the author of a held notice). A
// failure is logged: the page shows the same.
type ApprovalNotifier interface {
	// AskApproval asks approvers for version hash of n, with the card's
	// taskID (yidu.ApprovalTaskID), new for each request.
	AskApproval(ctx context.Context, n yidu.Notice, hash, taskID string, recipients uint64, approvers []string) error
	Decided(ctx context.Context, n yidu.Notice, step store.ApprovalStep) error
}

// ApprovalHash is the version of n an approval is for: sha256 over its
// title, body and link, its audience as asked, its schedule, its
// follow-up policy, and its content version's hash and read rule
// (content.VersionHash, when it has content). Any edit of one of them
// makes another hash, which needs approval again.
func (s *Service) ApprovalHash(ctx context.Context, n yidu.Notice) (string, error) {
	v := struct {
		Title, Body, URL string
		Audience         yidu.Audience
		SendAt           string
		Policy           *yidu.Policy
		Content          string
		ReadRule         yidu.ReadRule
		// Draft is the full text a notice not yet sent keeps (issue 39):
		// its Markdown, attachments (an upload id names immutable bytes),
		// read rule and min_read_seconds. Left out when none, so the
		// hashes of notices without it are as they were.
		Draft *yidu.NoticeContent `json:",omitempty"`
		// Standing is a standing notice's rule (issue 51): whom it
		// enrols later, by when, and on which cycle everyone is asked
		// again. Approved, it covers its joiners' cards and its cycles'
		// versions (the approved text with the cycle's line). Left out
		// for other notices.
		Standing *approvedStanding `json:",omitempty"`
	}{Title: n.Title, Body: n.Body, URL: n.URL, Audience: n.Audience, Draft: n.Content}
	if !n.SendAt.IsZero() {
		v.SendAt = n.SendAt.UTC().Format(time.RFC3339)
	}
	if fo, ok := s.o.Rounds.(interface {
		FollowUpOf(ctx context.Context, corpID, msgID string) (loops.FollowUp, bool, error)
	}); ok {
		fu, has, err := fo.FollowUpOf(ctx, n.App.CorpID, n.MsgID)
		if err != nil {
			return "", err
		}
		if has {
			v.Policy = &fu.Policy
		}
	}
	if s.o.Standing != nil {
		spec, ok, err := s.o.Standing.Spec(ctx, n.App.CorpID, n.MsgID)
		if err != nil {
			return "", err
		}
		if ok {
			v.Standing = &approvedStanding{JoinDeadline: cmp.Or(spec.JoinDeadline, yidu.DefaultJoinDeadline), ReacknowledgeEvery: spec.ReacknowledgeEvery}
		}
	}
	if s.o.Versions != nil {
		ver, err := s.o.Versions.Get(ctx, n.App.CorpID, n.MsgID, 0)
		switch {
		case err == nil:
			v.Content, v.ReadRule = ver.SHA256.String(), ver.Settings.ReadRule
		case !errors.Is(err, noticev.ErrNotFound):
			return "", fmt.Errorf("campaign: content of %s: %w", n.MsgID, err)
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("campaign: version of %s: %w", n.MsgID, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// approvedStanding is what an approval binds of a standing rule: what
// makes yidu send. Its end (until) only ever stops it, by an admin.
type approvedStanding struct {
	JoinDeadline       string
	ReacknowledgeEvery string `json:",omitempty"`
}

// NeedsApproval reports whether n needs approval under its app's rule,
// and how many people it reaches now.
func (s *Service) NeedsApproval(ctx context.Context, n yidu.Notice) (bool, uint64, error) {
	if n.App.Approval == nil {
		return false, 0, nil
	}
	var rr yidu.ReadRule
	if n.Content != nil {
		return s.NeedsApprovalFor(ctx, n.App, n.Audience, n.Content.ReadRule)
	}
	if s.o.Versions != nil {
		ver, err := s.o.Versions.Get(ctx, n.App.CorpID, n.MsgID, 0)
		if err != nil && !errors.Is(err, noticev.ErrNotFound) {
			return false, 0, fmt.Errorf("campaign: read rule of %s: %w", n.MsgID, err)
		}
		rr = ver.Settings.ReadRule
	}
	return s.NeedsApprovalFor(ctx, n.App, n.Audience, rr)
}

// NeedsApprovalFor reports whether a notice of app to au with read rule
// rr needs approval, and how many people au reaches now: what the
// dashboard asks before it sends a notice straight away.
func (s *Service) NeedsApprovalFor(ctx context.Context, app yidu.App, au yidu.Audience, rr yidu.ReadRule) (bool, uint64, error) {
	rule := app.Approval
	if rule == nil {
		return false, 0, nil
	}
	if s.st == nil {
		return true, 0, nil // never sent unapproved: nothing can hold it
	}
	count, _, err := s.st.Recipients(ctx, app.CorpID, au)
	if err != nil {
		return false, 0, err
	}
	return rule.Needs(count, au.All, rr), count, nil
}

// MayApprove says whether p may approve or reject n: an approver of its
// app's rule (named, or holding its role) who is not its author.
func MayApprove(p *access.Principal, n yidu.Notice) error {
	d := access.Decide(p, yidu.ActionApprove, access.Target{Corp: n.App.CorpID, App: n.App.Name, MsgID: n.MsgID,
		Approval: n.App.Approval, Author: n.CreatedBy})
	switch {
	case d.Allowed:
		return nil
	case d.Own():
		return ErrOwnNotice
	}
	return fmt.Errorf("%w: %s", ErrForbidden, d.Reason)
}

// review brings n's approval up to date after it was composed, edited
// or asked to be sent (now: the author's 立即发送): a notice that does not
// need approval has none; one that needs it and is not approved in this
// version waits for it (pending), its approvers told once per version.
// It returns the notice as stored and whether it may be sent.
func (s *Service) review(ctx context.Context, p *access.Principal, n yidu.Notice, now bool) (yidu.Notice, bool, error) {
	need, count, err := s.NeedsApproval(ctx, n)
	if err != nil {
		return n, false, err
	}
	if !need {
		if n.Approval != yidu.ApprovalNone {
			if err := s.st.ClearApproval(ctx, n.MsgID); err != nil {
				return n, false, err
			}
			n.Approval, n.ApprovalHash, n.ApprovalNow = yidu.ApprovalNone, "", false
		}
		return n, true, nil
	}
	stored := n.ApprovalNow
	if now {
		n.ApprovalNow = true
	}
	hash, err := s.ApprovalHash(ctx, n)
	if err != nil {
		return n, false, err
	}
	if n.Approval == yidu.ApprovalApproved && n.ApprovalHash == hash {
		return n, true, nil
	}
	if n.Approval == yidu.ApprovalPending && n.ApprovalHash == hash {
		if now && !stored {
			if err := s.st.SendOnceApproved(ctx, n.MsgID, hash); err != nil {
				return n, false, err
			}
		}
		return n, false, nil // asked already
	}
	at := s.o.Now().UTC().Truncate(time.Millisecond)
	e := stepEvent(p, n, yidu.ActionApprovalRequest, at, "version="+hash)
	e.People = int64(count)
	asks, err := s.st.AskApproval(ctx, n, n.ApprovalNow, store.ApprovalStep{Hash: hash, Step: store.StepRequested, Actor: p.Name, At: at}, e)
	if err != nil {
		return n, false, err
	}
	n.Approval, n.ApprovalHash = yidu.ApprovalPending, hash
	s.log.InfoContext(ctx, "approval requested", "corp", n.App.CorpID, "msgid", n.MsgID, "version", hash[:12], "recipients", count, "by", p.Name)
	if s.o.Notify != nil && asks > 0 {
		task := yidu.ApprovalTaskID(yidu.MsgID(n.MsgID), hash, asks)
		// The author is never asked, nor who asked for this version (a
		// revision's): nobody approves their own. Cards go to the WeCom
		// approvers; the others sign in to the page.
		approvers := slices.DeleteFunc(s.cardApprovers(n), func(a string) bool { return a == p.Name })
		err := s.o.Notify.AskApproval(ctx, n, hash, task, count, approvers)
		if err != nil {
			// Told again with backoff (RetryApprovalCards, issue 46).
			s.log.WarnContext(ctx, "approvers not told; retried later", "corp", n.App.CorpID, "msgid", n.MsgID, "err", err)
			if len(approvers) > 0 {
				s.cardFailed(ctx, n, hash, task, count, err)
			}
		}
		if len(approvers) > 0 {
			s.told(ctx, n, fmt.Sprintf("to=approvers count=%d step=%s version=%s", len(approvers), store.StepRequested, hash), err)
		}
	}
	return n, false, nil
}

// System is the audit actor of what yidu does by itself (the Runner's
// hold, a request at a notice's time, the messages it sends).
const System = store.System

// stepEvent is the audit row of an approval step of n by p at at (nil
// p: yidu itself). Detail carries the version hash ("version=…"), so
// each row says who, when and which version.
func stepEvent(p *access.Principal, n yidu.Notice, act yidu.Action, at time.Time, detail string) audit.Event {
	return store.StepEvent(p, n, act, at, detail)
}

// told records that yidu told someone of an approval step through
// WeCom (detail: to whom, which step and version), failed when err is
// not nil. A failed write is logged: the message went, or did not,
// either way.
func (s *Service) told(ctx context.Context, n yidu.Notice, detail string, sendErr error) {
	e := stepEvent(nil, n, yidu.ActionNotify, s.o.Now().UTC(), detail)
	if sendErr != nil {
		e.Outcome = "failed"
	}
	_ = s.st.Audit(ctx, e) // logged there
}

// Decision is an approver's answer to one version of a notice.
type Decision struct {
	// Hash is the version the approver saw (ApprovalHash).
	Hash string
	// Approve, or reject with Reason (required).
	Approve bool
	Reason  string
	// Via says where the decision was taken for its audit row: "page"
	// (with the client's address and agent) or "card" (the WeCom
	// callback of the approval card).
	Via                 string
	ClientIP, UserAgent string
}

// Decide approves or rejects version d.Hash of n for p. It is
// idempotent: the same decision on the same version again (a press
// replayed, a callback delivered twice, on any replica) returns the
// notice with again true and changes nothing. An approved notice whose
// author asked to send it now is made due in the same transaction, so
// the Runner sends it once; a scheduled one waits for its time. A
// decision taken is audited here with its step, in its transaction; one
// refused (for p's role or n's approval) or failed is due the row acts
// returns ("version=" the hash shown).
func (s *Service) Decide(ctx context.Context, p *access.Principal, n yidu.Notice, d Decision) (_ yidu.Notice, again bool, acts []Act, err error) {
	act := yidu.ActionApprove
	if !d.Approve {
		act = yidu.ActionReject
	}
	defer func() {
		if err != nil {
			due(&acts, &err, Act{Action: act, MsgID: n.MsgID, Detail: "version=" + yidu.Truncate(d.Hash, 64)})
		}
	}()
	if err := MayApprove(p, n); err != nil {
		return yidu.Notice{}, false, nil, err
	}
	if s.st == nil {
		return yidu.Notice{}, false, nil, ErrNoCampaigns
	}
	got, again, err := s.decide(ctx, p, n, d, act)
	return got, again, nil, err
}

func (s *Service) decide(ctx context.Context, p *access.Principal, n yidu.Notice, d Decision, act yidu.Action) (yidu.Notice, bool, error) {
	if err := s.notOwnRevision(ctx, p, n); err != nil {
		return yidu.Notice{}, false, err
	}
	reason := strings.TrimSpace(d.Reason)
	if !d.Approve && reason == "" {
		return yidu.Notice{}, false, yidu.Invalidf("reason: a rejection needs a reason")
	}
	if len(reason) > 500 {
		return yidu.Notice{}, false, yidu.Invalidf("reason: at most 500 bytes")
	}
	to, step := yidu.ApprovalApproved, store.StepApproved
	if !d.Approve {
		to, step = yidu.ApprovalRejected, store.StepRejected
	}
	if n.ApprovalHash == d.Hash && n.Approval == to {
		return n, true, nil
	}
	if n.Approval != yidu.ApprovalPending {
		return yidu.Notice{}, false, fmt.Errorf("%w: %s is not waiting for approval", ErrApproval, n.MsgID)
	}
	cur, err := s.ApprovalHash(ctx, n)
	if err != nil {
		return yidu.Notice{}, false, err
	}
	if d.Hash != cur || d.Hash != n.ApprovalHash {
		return yidu.Notice{}, false, fmt.Errorf("%w: %s changed since this version was shown; look at it again", ErrApproval, n.MsgID)
	}
	at := s.o.Now().UTC().Truncate(time.Millisecond)
	detail := "version=" + d.Hash
	if d.Via != "" {
		detail += " via=" + d.Via
	}
	if reason != "" {
		detail += " reason=" + reason
	}
	e := stepEvent(p, n, act, at, detail)
	e.ClientIP, e.UserAgent = d.ClientIP, d.UserAgent
	// The author asked to send it now: due now, never held, claimed by
	// one Runner.
	sendNow := d.Approve && n.ApprovalNow && n.State.Editable()
	again, err := s.st.Decide(ctx, n, to, sendNow, store.ApprovalStep{Hash: d.Hash, Step: step, Actor: p.Name, At: at, Reason: reason}, e)
	if err != nil {
		return yidu.Notice{}, false, err
	}
	got, err := s.st.Get(ctx, nil, n.MsgID)
	if err != nil {
		return yidu.Notice{}, false, err
	}
	if again {
		if got.ApprovalHash == d.Hash && got.Approval == to {
			// A replay publishes what a failure left unpublished.
			return got, true, s.approvedRevision(ctx, got)
		}
		return yidu.Notice{}, false, fmt.Errorf("%w: %s was decided otherwise or changed meanwhile", ErrApproval, n.MsgID)
	}
	s.log.InfoContext(ctx, "notice "+step, "corp", n.App.CorpID, "msgid", n.MsgID, "version", d.Hash[:min(12, len(d.Hash))], "by", p.Name)
	if s.o.Notify != nil {
		err := s.o.Notify.Decided(ctx, got, store.ApprovalStep{Hash: d.Hash, Step: step, Actor: p.Name, At: at, Reason: reason})
		if err != nil {
			s.log.WarnContext(ctx, "author not told", "corp", n.App.CorpID, "msgid", n.MsgID, "err", err)
		}
		s.told(ctx, n, "to=author userid="+n.CreatedBy+" step="+step+" version="+d.Hash, err)
	}
	return got, false, s.approvedRevision(ctx, got)
}

// notOwnRevision refuses the one who asked for a sent notice's pending
// revision its approval: nobody approves their own version.
func (s *Service) notOwnRevision(ctx context.Context, p *access.Principal, n yidu.Notice) error {
	if n.State != yidu.StateSent || n.Approval != yidu.ApprovalPending {
		return nil
	}
	by, _, found, err := s.st.RequestedBy(ctx, n, n.ApprovalHash)
	if err != nil || !found {
		return err
	}
	if by == p.Name || (p.UserID != "" && by == p.UserID) {
		return ErrOwnNotice
	}
	return nil
}

// approvedRevision publishes the revision of a sent notice n once it is
// approved (holdRevision kept it); anything else has none.
func (s *Service) approvedRevision(ctx context.Context, n yidu.Notice) error {
	if n.State != yidu.StateSent || n.Approval != yidu.ApprovalApproved || n.Content == nil {
		return nil
	}
	return s.publishRevision(ctx, n)
}

// Authors resolves a notice's author as the configuration has them now
// (a password user, a token, or a WeCom member with a role), so that a
// scheduled notice is checked at its time against what its author may
// send then (issue 41). ErrNoAuthor: none of them any more.
type Authors interface {
	Author(ctx context.Context, corp, name string) (*access.Principal, error)
}

// ErrNoAuthor: a notice's author is no longer a configured user or
// token, nor an active member with a role.
var ErrNoAuthor = errors.New("the author is no longer a user, token or member with a role")

// AtItsTime checks scheduled notice n when its time has come, before
// the Runner claims it (RunnerOptions.Check), against what holds now
// rather than at compose: its author must still send through its app,
// to an audience inside their sender audience (Authors; the
// configuration may have narrowed it); and a notice that needs approval
// now (the directory may have grown past approval.over) must be
// approved in its current version, else approval is asked for (once
// per version, by yidu) and it is held 待审批. It returns the reason to
// hold n, or "" to send it. It writes nothing but an approval request.
func (s *Service) AtItsTime(ctx context.Context, n yidu.Notice) (string, error) {
	// Compose records its author; a row without one (made by other
	// code) has no audience to check: its approval still is.
	if s.o.Authors != nil && n.CreatedBy != "" {
		p, err := s.o.Authors.Author(ctx, n.App.CorpID, n.CreatedBy)
		switch {
		case errors.Is(err, ErrNoAuthor):
			return loops.ReasonAuthorMayNotSend, nil
		case err != nil:
			return "", fmt.Errorf("campaign: author of %s: %w", n.MsgID, err)
		}
		if !p.MaySend(n.App.CorpID, n.App.Name) {
			return loops.ReasonAuthorMayNotSend, nil
		}
		var ae *AudienceError
		switch err := s.CheckAudience(ctx, p, n.App, n.Audience); {
		case errors.As(err, &ae):
			return loops.ReasonOutsideAudience + ae.Field + ": " + ae.Reason, nil
		case err != nil:
			return "", err
		}
	}
	need, _, err := s.NeedsApproval(ctx, n)
	if err != nil || !need {
		return "", err
	}
	if n.Approval == yidu.ApprovalApproved {
		if n.ApprovalNow {
			// Approved to be sent now: the approval made it due (its
			// send_at, part of the hash, moved to the decision); an
			// edit since asked again (review).
			return "", nil
		}
		hash, err := s.ApprovalHash(ctx, n)
		if err != nil {
			return "", err
		}
		if hash == n.ApprovalHash {
			return "", nil
		}
	}
	if _, _, err := s.review(ctx, access.NewPrincipal(System, "system", false, nil), n, false); err != nil {
		return "", err
	}
	return loops.ReasonAwaitingApproval, nil
}

// ApprovalTrail returns every step of n's approvals, oldest first.
func (s *Service) ApprovalTrail(ctx context.Context, n yidu.Notice) ([]store.ApprovalStep, error) {
	if s.st == nil {
		return nil, ErrNoCampaigns
	}
	return s.st.ApprovalTrail(ctx, n)
}
