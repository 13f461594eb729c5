package access

import (
	"errors"
	"fmt"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/audit"
)

// Acts (issue 47). Who may do what is decided once, by Decide, for every
// act and every path that does it: the dashboard's handlers, campaign's
// service and the approval card's receiver ask it and never decide a
// role themselves. A Decision carries the audit row the act is due,
// refused ones included, so an edge writes the row it is given (with
// the request's address) and never derives one from a route or a
// status.

// Target is what an act is on: the corp and app it goes through, the
// notice ("" for an act on none: an upload, a template, a sign-in).
type Target struct {
	Corp, App, MsgID string
	// Approval and Author are, for approve and reject, the notice's
	// app's approval rule and who composed it.
	Approval *yidu.Approval
	Author   string
	// Standing marks an edit of a standing notice's rule (its end,
	// issue 51): the corp's admins' act, audited as an edit.
	Standing bool
}

// Decision is Decide's answer: whether the act may go on, why not, and
// the audit row the act is due as decided (outcome "ok" when allowed,
// "refused" with the reason as its detail when not). An allowed act
// that then runs records Event with the service's outcome instead.
type Decision struct {
	Allowed bool
	// Reason says why the act is refused, in the words of the API's
	// error ("" when allowed).
	Reason string
	Event  audit.Event
}

// Err is the refusal as an error wrapping ErrRefused; nil when allowed.
func (d Decision) Err() error {
	if d.Allowed {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrRefused, d.Reason)
}

// ErrRefused is a Decision's refusal: the caller's role does not allow
// the act (the dashboard's 403).
var ErrRefused = errors.New("forbidden")

// Decide decides whether p may do act to t, fail-closed: a nil
// principal, an act it does not know, or a target without its corp (or,
// for an act through an app, without its app) is refused. The rules:
//
//   - send, compose, schedule, edit, cancel, recall, follow-up change,
//     upload, approval request, nudge and withdraw: an admin of the corp
//     or a sender of the app (Principal.MaySend).
//   - remind: the same, or a department leader (its own people:
//     Access.RemindView keeps it to them); a configured viewer reads only.
//   - template: an admin of the corp.
//   - standing (an edit of a standing notice's rule): an admin of the
//     corp.
//   - export, recipients, evidence: whoever sees the app's notices (its
//     View narrows whom): a sender of the app, an admin, a viewer of the
//     corp's departments.
//   - approve, reject: an approver of the app's rule (named, or holding
//     its role) who is not the notice's author.
//   - sign-in, sign-out: any principal (access resolved it: a member
//     with no role never becomes one).
//
// It writes nothing; a caller records Event.
func Decide(p *Principal, act yidu.Action, t Target) Decision {
	e := p.Event(act, t.Corp, t.App, t.MsgID)
	reason := refusal(p, act, t)
	if reason == "" {
		e.Outcome = "ok"
		return Decision{Allowed: true, Event: e}
	}
	e.Outcome, e.Detail = "refused", reason
	return Decision{Reason: reason, Event: e}
}

// refusal is why p may not do act to t; "" when it may.
func refusal(p *Principal, act yidu.Action, t Target) string {
	if p == nil {
		return fmt.Sprintf("%s needs a signed-in caller", act)
	}
	switch act {
	case yidu.ActionSignIn, yidu.ActionSignOut:
		return ""
	}
	if t.Corp == "" {
		return fmt.Sprintf("%s: the corp of the act is unknown", act)
	}
	switch act {
	case yidu.ActionApprove, yidu.ActionReject:
		return approveRefusal(p, t)
	case yidu.ActionSend, yidu.ActionCompose, yidu.ActionSchedule, yidu.ActionEdit, yidu.ActionCancel, yidu.ActionRecall,
		yidu.ActionFollowUpChange, yidu.ActionUpload, yidu.ActionApprovalRequest, yidu.ActionApprovalNudge, yidu.ActionApprovalWithdraw:
		if act == yidu.ActionEdit && t.Standing {
			if !p.Admin(t.Corp) {
				return "only an admin may end a standing notice"
			}
			return ""
		}
		if !p.MaySend(t.Corp, t.App) {
			return fmt.Sprintf("your role may not %s through this app", verb(act))
		}
	case yidu.ActionRemind:
		// A department leader reminds its own people; nobody else who
		// does not send. Remind and recall share MaySend: a sender of
		// the app or an admin does both.
		if !p.MaySend(t.Corp, t.App) && !p.MayRemindScoped(t.Corp, t.App) {
			return "your role may not remind through this app"
		}
	case yidu.ActionTemplate:
		if !p.Admin(t.Corp) {
			return "only an admin may change the app's templates"
		}
	case yidu.ActionExport, yidu.ActionRecipients, yidu.ActionEvidence:
		if !p.MaySend(t.Corp, t.App) && p.Departments(t.Corp) == nil {
			return "your role does not see this app's notices"
		}
	default:
		return fmt.Sprintf("%q is not an act anyone may do", act)
	}
	if t.App == "" {
		return fmt.Sprintf("%s: the app of the act is unknown", act)
	}
	return ""
}

// approveRefusal is why p may not approve or reject a notice of t: an
// approver is named by the rule (by kind and name: a WeCom member whose
// UserID is a password user's name is not that user, issue 46) or
// holds its role, and is not the author.
func approveRefusal(p *Principal, t Target) string {
	rule := t.Approval
	if rule == nil {
		return "your role may not approve this notice"
	}
	if t.Author != "" && (p.Name == t.Author || (p.UserID != "" && p.UserID == t.Author)) {
		return ownNotice
	}
	named := rule.Names(string(p.Kind), p.Name) || (p.UserID != "" && rule.Names(yidu.ApproverWeCom, p.UserID))
	byRole := (rule.Role == yidu.RoleAdmin && p.Admin(t.Corp)) ||
		(rule.Role == yidu.RoleSender && p.MaySend(t.Corp, t.App))
	if !named && !byRole {
		return "your role may not approve this notice"
	}
	return ""
}

// ownNotice is the reason of ErrOwnNotice.
const ownNotice = "nobody approves their own notice"

// Own reports whether d refuses an author's approval of their own notice.
func (d Decision) Own() bool { return !d.Allowed && d.Reason == ownNotice }

// verb is act's words in a refusal ("your role may not … through this
// app").
func verb(act yidu.Action) string {
	switch act {
	case yidu.ActionFollowUpChange:
		return "manage this notice's follow-up"
	case yidu.ActionUpload:
		return "send"
	case yidu.ActionApprovalRequest:
		return "ask approval"
	case yidu.ActionApprovalNudge:
		return "ask approvers of this notice"
	case yidu.ActionApprovalWithdraw:
		return "withdraw this notice's approval request"
	}
	return string(act)
}

// Actor is the audit actor of p: its name (a WeCom member's UserID, a
// password user's name, a token's name), never its secret, and how it
// proved who it is ("wecom", "password", "token"). "" for nil.
func (p *Principal) Actor() (name, kind string) {
	if p == nil {
		return "", ""
	}
	name = p.Name
	if p.Kind == KindWeCom && p.UserID != "" {
		name = p.UserID
	}
	kind = string(p.Kind)
	if p.Kind == KindUser {
		kind = "password"
	}
	return name, kind
}

// Event is the audit row of p doing act on corp (its role there) through
// app on msgID, without outcome, time or address: the one rule naming
// the actor of every row a principal's act leaves.
func (p *Principal) Event(act yidu.Action, corp, app, msgID string) audit.Event {
	name, kind := p.Actor()
	e := audit.Event{Actor: name, ActorKind: kind, Action: act, CorpID: corp, App: app, MsgID: msgID}
	if p != nil && corp != "" {
		e.Role = string(p.Role(corp))
	}
	return e
}
