package campaign

import (
	"context"
	"crypto/sha256"
	"database/sql"
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
	AskApproval(ctx context.Context, n Notice, hash, taskID string, recipients uint64, approvers []string) error
	Decided(ctx context.Context, n Notice, step ApprovalStep) error
}

// ApprovalStep is one row of a notice's approval trail (notice_approvals).
type ApprovalStep struct {
	Hash   string    `json:"version_hash"`
	Step   string    `json:"step"` // requested, approved, rejected, held
	Actor  string    `json:"actor"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason,omitempty"`
}

// Steps of the approval trail.
const (
	StepRequested = "requested"
	StepApproved  = "approved"
	StepRejected  = "rejected"
	StepHeld      = "held"
)

// ApprovalHash is the version of n an approval is for: sha256 over its
// title, body and link, its audience as asked, its schedule, its
// follow-up policy, and its content version's hash and read rule
// (content.VersionHash, when it has content). Any edit of one of them
// makes another hash, which needs approval again.
func (s *Service) ApprovalHash(ctx context.Context, n Notice) (string, error) {
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
	}{Title: n.Title, Body: n.Body, URL: n.URL, Audience: n.Audience, Draft: n.Content}
	if !n.SendAt.IsZero() {
		v.SendAt = n.SendAt.UTC().Format(time.RFC3339)
	}
	if fo, ok := s.o.Rounds.(interface {
		FollowUpOf(ctx context.Context, corpID, msgID string) (FollowUp, bool, error)
	}); ok {
		fu, has, err := fo.FollowUpOf(ctx, n.App.CorpID, n.MsgID)
		if err != nil {
			return "", err
		}
		if has {
			v.Policy = &fu.Policy
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

// NeedsApproval reports whether n needs approval under its app's rule,
// and how many people it reaches now.
func (s *Service) NeedsApproval(ctx context.Context, n Notice) (bool, uint64, error) {
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
	if s.o.Store == nil {
		return true, 0, nil // never sent unapproved: nothing can hold it
	}
	var count uint64
	if s.o.Store.dir != nil {
		x, err := s.o.Store.dir.Expand(ctx, app.CorpID, au)
		if err != nil {
			return false, 0, fmt.Errorf("campaign: count recipients: %w", err)
		}
		count = x.Recipients.GetCardinality()
	}
	return rule.Needs(count, au.All, rr), count, nil
}

// MayApprove says whether p may approve or reject n: an approver of its
// app's rule (named, or holding its role) who is not its author.
func MayApprove(p *access.Principal, n Notice) error {
	rule := n.App.Approval
	if p == nil || rule == nil {
		return fmt.Errorf("%w: your role may not approve this notice", ErrForbidden)
	}
	if p.Name == n.CreatedBy || (p.UserID != "" && p.UserID == n.CreatedBy) {
		return ErrOwnNotice
	}
	named := slices.Contains(rule.Approvers, p.Name) || (p.UserID != "" && slices.Contains(rule.Approvers, p.UserID))
	byRole := (rule.Role == yidu.RoleAdmin && p.Admin(n.App.CorpID)) ||
		(rule.Role == yidu.RoleSender && p.MaySend(n.App.CorpID, n.App.Name))
	if !named && !byRole {
		return fmt.Errorf("%w: your role may not approve this notice", ErrForbidden)
	}
	return nil
}

// review brings n's approval up to date after it was composed, edited
// or asked to be sent (now: the author's 立即发送): a notice that does not
// need approval has none; one that needs it and is not approved in this
// version waits for it (pending), its approvers told once per version.
// It returns the notice as stored and whether it may be sent.
func (s *Service) review(ctx context.Context, p *access.Principal, n Notice, now bool) (Notice, bool, error) {
	need, count, err := s.NeedsApproval(ctx, n)
	if err != nil {
		return n, false, err
	}
	if !need {
		if n.Approval != yidu.ApprovalNone {
			_, err := execRetry(ctx, s.o.Store.db, `UPDATE campaigns SET approval = '', approval_hash = '', approval_now = 0 WHERE msgid = ?`, n.MsgID)
			if err != nil {
				return n, false, fmt.Errorf("campaign: clear approval of %s: %w", n.MsgID, err)
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
			_, err := execRetry(ctx, s.o.Store.db, `UPDATE campaigns SET approval_now = 1 WHERE msgid = ? AND approval_hash = ?`, n.MsgID, hash)
			if err != nil {
				return n, false, fmt.Errorf("campaign: ask to send %s once approved: %w", n.MsgID, err)
			}
		}
		return n, false, nil // asked already
	}
	at := s.o.Now().UTC().Truncate(time.Millisecond)
	var asks int64
	err = s.o.Store.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE campaigns SET approval = 'pending', approval_hash = ?, approval_now = ?, updated_at = ?
			WHERE msgid = ? AND NOT (approval = 'pending' AND approval_hash = ?)`, hash, n.ApprovalNow, at, n.MsgID, hash)
		if err != nil {
			return err
		}
		if c, _ := res.RowsAffected(); c == 0 {
			return nil // another request asked for this version first
		}
		e := stepEvent(p, n, yidu.ActionApprovalRequest, at, "version="+hash)
		e.People = int64(count)
		if err := insertStep(ctx, tx, n, ApprovalStep{Hash: hash, Step: StepRequested, Actor: p.Name, At: at}, e); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM notice_approvals WHERE corp_id = ? AND msgid = ? AND step = ?`,
			n.App.CorpID, n.MsgID, StepRequested).Scan(&asks)
	})
	if err != nil {
		return n, false, fmt.Errorf("campaign: ask approval of %s: %w", n.MsgID, err)
	}
	n.Approval, n.ApprovalHash = yidu.ApprovalPending, hash
	s.log.InfoContext(ctx, "approval requested", "corp", n.App.CorpID, "msgid", n.MsgID, "version", hash[:12], "recipients", count, "by", p.Name)
	if s.o.Notify != nil && asks > 0 {
		task := yidu.ApprovalTaskID(yidu.MsgID(n.MsgID), hash, asks)
		// The author is never asked (nobody approves their own).
		approvers := slices.DeleteFunc(slices.Clone(n.App.Approval.Approvers), func(a string) bool { return a == n.CreatedBy })
		err := s.o.Notify.AskApproval(ctx, n, hash, task, count, approvers)
		if err != nil {
			s.log.WarnContext(ctx, "approvers not told", "corp", n.App.CorpID, "msgid", n.MsgID, "err", err)
		}
		if len(approvers) > 0 {
			s.o.Store.told(ctx, n, fmt.Sprintf("to=approvers count=%d step=%s version=%s", len(approvers), StepRequested, hash), err)
		}
	}
	return n, false, nil
}

// insertStep writes step st of n's approval trail and its audit row e
// in tx: the step and its row are written together, once (the caller's
// conditional UPDATE in the same transaction decides that it happens).
func insertStep(ctx context.Context, tx execer, n Notice, st ApprovalStep, e audit.Event) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO notice_approvals (corp_id, msgid, version_hash, step, actor, at, reason)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, n.App.CorpID, n.MsgID, st.Hash, st.Step, yidu.Truncate(st.Actor, 128), st.At, yidu.Truncate(st.Reason, 500))
	if err != nil {
		return err
	}
	return audit.Insert(ctx, tx, e)
}

// System is the audit actor of what yidu does by itself (the Runner's
// hold, a request at a notice's time, the messages it sends).
const System = "yidu"

// stepEvent is the audit row of an approval step of n by p at at (nil
// p: yidu itself). Detail carries the version hash ("version=…"), so
// each row says who, when and which version.
func stepEvent(p *access.Principal, n Notice, act yidu.Action, at time.Time, detail string) audit.Event {
	e := audit.Event{At: at, Actor: System, ActorKind: "system", Action: act, CorpID: n.App.CorpID, App: n.App.Name,
		MsgID: n.MsgID, Outcome: "ok", Detail: detail}
	if p != nil && p.Name != System {
		e.Actor, e.ActorKind, e.Role = p.Name, string(p.Kind), string(p.Role(n.App.CorpID))
		if p.Kind == access.KindWeCom && p.UserID != "" {
			e.Actor = p.UserID
		}
		if p.Kind == access.KindUser {
			e.ActorKind = "password"
		}
	}
	return e
}

// told records that yidu told someone of an approval step through
// WeCom (detail: to whom, which step and version), failed when err is
// not nil. A failed write is logged: the message went, or did not,
// either way.
func (s *Store) told(ctx context.Context, n Notice, detail string, sendErr error) {
	e := stepEvent(nil, n, yidu.ActionNotify, s.now().UTC(), detail)
	if sendErr != nil {
		e.Outcome = "failed"
	}
	if err := audit.Insert(context.WithoutCancel(ctx), s.db, e); err != nil {
		s.log.ErrorContext(ctx, "audit write failed", "action", string(e.Action), "msgid", n.MsgID, "err", err)
	}
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
// the Runner sends it once; a scheduled one waits for its time.
func (s *Service) Decide(ctx context.Context, p *access.Principal, n Notice, d Decision) (Notice, bool, error) {
	if s.o.Store == nil {
		return Notice{}, false, ErrNoCampaigns
	}
	if err := MayApprove(p, n); err != nil {
		return Notice{}, false, err
	}
	reason := strings.TrimSpace(d.Reason)
	if !d.Approve && reason == "" {
		return Notice{}, false, yidu.Invalidf("reason: a rejection needs a reason")
	}
	if len(reason) > 500 {
		return Notice{}, false, yidu.Invalidf("reason: at most 500 bytes")
	}
	to, step := yidu.ApprovalApproved, StepApproved
	if !d.Approve {
		to, step = yidu.ApprovalRejected, StepRejected
	}
	if n.ApprovalHash == d.Hash && n.Approval == to {
		return n, true, nil
	}
	if n.Approval != yidu.ApprovalPending {
		return Notice{}, false, fmt.Errorf("%w: %s is not waiting for approval", ErrApproval, n.MsgID)
	}
	cur, err := s.ApprovalHash(ctx, n)
	if err != nil {
		return Notice{}, false, err
	}
	if d.Hash != cur || d.Hash != n.ApprovalHash {
		return Notice{}, false, fmt.Errorf("%w: %s changed since this version was shown; look at it again", ErrApproval, n.MsgID)
	}
	at := s.o.Now().UTC().Truncate(time.Millisecond)
	again := false
	err = s.o.Store.inTx(ctx, func(tx *sql.Tx) error {
		set := "approval = ?, updated_at = ?"
		args := []any{string(to), at}
		if d.Approve && n.ApprovalNow && n.State.Editable() {
			// The author asked to send it now: due now, never held
			// (reasonSendNow), claimed by one Runner.
			set += ", state = 'scheduled', state_reason = ?, send_at = IF(send_at IS NULL OR send_at > ?, ?, send_at)"
			args = append(args, reasonSendNow, at, at)
		}
		args = append(args, n.MsgID, d.Hash)
		res, err := tx.ExecContext(ctx, `UPDATE campaigns SET `+set+` WHERE msgid = ? AND approval = 'pending' AND approval_hash = ?`, args...)
		if err != nil {
			return err
		}
		if c, _ := res.RowsAffected(); c == 0 {
			again = true
			return nil
		}
		act := yidu.ActionApprove
		if !d.Approve {
			act = yidu.ActionReject
		}
		detail := "version=" + d.Hash
		if d.Via != "" {
			detail += " via=" + d.Via
		}
		if reason != "" {
			detail += " reason=" + reason
		}
		e := stepEvent(p, n, act, at, detail)
		e.ClientIP, e.UserAgent = d.ClientIP, d.UserAgent
		return insertStep(ctx, tx, n, ApprovalStep{Hash: d.Hash, Step: step, Actor: p.Name, At: at, Reason: reason}, e)
	})
	if err != nil {
		return Notice{}, false, fmt.Errorf("campaign: %s %s: %w", step, n.MsgID, err)
	}
	got, err := s.o.Store.Get(ctx, nil, n.MsgID)
	if err != nil {
		return Notice{}, false, err
	}
	if again {
		if got.ApprovalHash == d.Hash && got.Approval == to {
			return got, true, nil
		}
		return Notice{}, false, fmt.Errorf("%w: %s was decided otherwise or changed meanwhile", ErrApproval, n.MsgID)
	}
	s.log.InfoContext(ctx, "notice "+step, "corp", n.App.CorpID, "msgid", n.MsgID, "version", d.Hash[:min(12, len(d.Hash))], "by", p.Name)
	if s.o.Notify != nil {
		err := s.o.Notify.Decided(ctx, got, ApprovalStep{Hash: d.Hash, Step: step, Actor: p.Name, At: at, Reason: reason})
		if err != nil {
			s.log.WarnContext(ctx, "author not told", "corp", n.App.CorpID, "msgid", n.MsgID, "err", err)
		}
		s.o.Store.told(ctx, n, "to=author "+n.CreatedBy+" step="+step+" version="+d.Hash, err)
	}
	return got, false, nil
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

// Reasons a scheduled notice is held at its time (state_reason), besides
// ReasonAwaitingApproval.
const (
	// ReasonOutsideAudience starts the reason of a notice outside its
	// author's sender audience now (the configuration narrowed it since
	// compose); the field and why follow.
	ReasonOutsideAudience = "held: outside its author's sender audience now (超出发送范围); it was not sent: "
	// ReasonAuthorMayNotSend: the author may no longer send through the
	// app (role removed, or left the company).
	ReasonAuthorMayNotSend = "held: its author may no longer send through this app; it was not sent"
)

// AtItsTime checks scheduled notice n when its time has come, before
// the Runner claims it (RunnerOptions.Check), against what holds now
// rather than at compose: its author must still send through its app,
// to an audience inside their sender audience (Authors; the
// configuration may have narrowed it); and a notice that needs approval
// now (the directory may have grown past approval.over) must be
// approved in its current version, else approval is asked for (once
// per version, by yidu) and it is held 待审批. It returns the reason to
// hold n, or "" to send it. It writes nothing but an approval request.
func (s *Service) AtItsTime(ctx context.Context, n Notice) (string, error) {
	// Compose records its author; a row without one (made by other
	// code) has no audience to check: its approval still is.
	if s.o.Authors != nil && n.CreatedBy != "" {
		p, err := s.o.Authors.Author(ctx, n.App.CorpID, n.CreatedBy)
		switch {
		case errors.Is(err, ErrNoAuthor):
			return ReasonAuthorMayNotSend, nil
		case err != nil:
			return "", fmt.Errorf("campaign: author of %s: %w", n.MsgID, err)
		}
		if !p.MaySend(n.App.CorpID, n.App.Name) {
			return ReasonAuthorMayNotSend, nil
		}
		var ae *AudienceError
		switch err := s.CheckAudience(ctx, p, n.App, n.Audience); {
		case errors.As(err, &ae):
			return ReasonOutsideAudience + ae.Field + ": " + ae.Reason, nil
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
	return ReasonAwaitingApproval, nil
}

// ApprovalTrail returns every step of n's approvals, oldest first.
func (s *Service) ApprovalTrail(ctx context.Context, n Notice) ([]ApprovalStep, error) {
	if s.o.Store == nil {
		return nil, ErrNoCampaigns
	}
	rows, err := s.o.Store.db.QueryContext(ctx, `SELECT version_hash, step, actor, at, reason FROM notice_approvals
		WHERE corp_id = ? AND msgid = ? ORDER BY id`, n.App.CorpID, n.MsgID)
	if err != nil {
		return nil, fmt.Errorf("campaign: approval trail: %w", err)
	}
	defer rows.Close()
	out := []ApprovalStep{}
	for rows.Next() {
		var st ApprovalStep
		if err := rows.Scan(&st.Hash, &st.Step, &st.Actor, &st.At, &st.Reason); err != nil {
			return nil, fmt.Errorf("campaign: approval trail: %w", err)
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

// inTx runs fn in a transaction of s's database.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
