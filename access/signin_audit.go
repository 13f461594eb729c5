package access

import (
	"cmp"
	"context"
	"errors"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/audit"
)

// Sign-ins and their audit rows (issue 47: the service decides the rows
// an act is due, the edge writes them with the request's address).

// Attempt is a sign-in's answer: the session it opened (ID "" and
// Session nil when none) and the audit rows it is due, a refused or
// failed attempt's too. An attempt anyone could make without being
// anyone (one over the limits, a forged or replayed WeCom state) is due
// none.
type Attempt struct {
	ID      string
	Session *SignIn
	Audit   []audit.Event
}

// SignIn checks user's password and opens a session (signIn: the limits
// before bcrypt). A wrong name or password (ErrBadPassword) is due a
// refused sign_in_failed row naming user only when user is a configured
// one (someone tried their password); any other name is "unknown", so
// no row names whatever a stranger typed (issue 38). A success is due a
// sign_in row. Over the limits (ErrRateLimited) is anyone's to cause:
// no row. A sign-in that could not be told or whose session could not be
// kept is due a failed sign_in_failed row, as one with WeCom is, its
// actor by the same rule.
func (a *Identities) SignIn(ctx context.Context, ip, user, password string) (Attempt, error) {
	id, s, err := a.signIn(ctx, ip, user, password)
	if err != nil && !errors.Is(err, ErrRateLimited) {
		actor, outcome := "unknown", "failed"
		if a.Known(user) {
			actor = user
		}
		if errors.Is(err, ErrBadPassword) {
			outcome = "refused"
		}
		return Attempt{Audit: []audit.Event{{Actor: actor, ActorKind: "password", Action: yidu.ActionSignInFailed, Outcome: outcome}}}, err
	}
	if err != nil {
		return Attempt{}, err
	}
	return Attempt{ID: id, Session: s, Audit: []audit.Event{{Actor: user, ActorKind: "password", Action: yidu.ActionSignIn, Outcome: "ok"}}}, nil
}

// WeComMembers resolves a WeCom member against the directory and the
// roles (Access.WeCom).
type WeComMembers interface {
	WeCom(ctx context.Context, corp, userID string) (*Principal, error)
}

// WeComFinish is a sign-in with WeCom as the web edge finished it
// (webedge.FinishWeCom: the state once and this browser's, the code
// once, then exchanged): the corp and UserID WeCom named, or why not.
type WeComFinish struct {
	Corp, UserID string
	Err          error
}

// SignInWeCom resolves the member a finished sign-in with WeCom named
// (members, the directory of now) and opens their session. home is the
// corp the sign-in is configured for: the row's corp when WeCom named
// none. One row per attempt, its actor the UserID WeCom named ("unknown"
// when it named none; never the code or the state):
//
//   - a state or code that is not a live sign-in's (ErrBadState,
//     ErrCodeUsed: forged, replayed, expired) is anyone's to send: no row;
//   - who is not an active member or holds no role (ErrNotMember,
//     ErrNoRole): sign_in_failed, refused;
//   - a sign-in that could not be told, or a session not kept:
//     sign_in_failed, failed;
//   - a success: sign_in, with the member's role in the corp.
func (a *Identities) SignInWeCom(ctx context.Context, members WeComMembers, home string, f WeComFinish) (Attempt, error) {
	err := f.Err
	if errors.Is(err, ErrBadState) || errors.Is(err, ErrCodeUsed) {
		return Attempt{}, err
	}
	var who *Principal
	if err == nil {
		who, err = members.WeCom(ctx, f.Corp, f.UserID)
	}
	ev := audit.Event{Actor: cmp.Or(f.UserID, "unknown"), ActorKind: string(KindWeCom), CorpID: cmp.Or(f.Corp, home),
		Action: yidu.ActionSignInFailed, Outcome: "failed"}
	if err != nil {
		if errors.Is(err, ErrNotMember) || errors.Is(err, ErrNoRole) {
			ev.Outcome = "refused"
		}
		return Attempt{Audit: []audit.Event{ev}}, err
	}
	ev.Role = string(who.Role(f.Corp))
	id, s, err := a.OpenWeCom(ctx, f.Corp, f.UserID)
	if err != nil {
		return Attempt{Audit: []audit.Event{ev}}, err
	}
	ev.Action, ev.Outcome = yidu.ActionSignIn, "ok"
	return Attempt{ID: id, Session: s, Audit: []audit.Event{ev}}, nil
}
