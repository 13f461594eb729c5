package dashboard

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/campaign"
)

// FollowUps keeps notices' follow-up policies and reports their rounds
// (campaign.Rounds, issue 30).
type FollowUps interface {
	SetPolicy(ctx context.Context, corpID, msgID string, p yidu.Policy, by string) error
	FollowUpOf(ctx context.Context, corpID, msgID string) (campaign.FollowUp, bool, error)
	CancelRound(ctx context.Context, corpID, msgID string) (bool, error)
	// CheckPolicy checks a policy for a notice sent at sendAt, writing
	// nothing; StorePolicy stores it, registered notice or not.
	CheckPolicy(p yidu.Policy, sendAt time.Time) error
	StorePolicy(ctx context.Context, corpID, msgID string, p yidu.Policy, sendAt time.Time, by string) error
}

// errNoFollowUps answers a follow_up posted to a server without the
// round engine.
var errNoFollowUps = yidu.Invalidf("follow_up: follow-up is not configured on this server")

// checkFollowUp checks a posted policy for a notice sent at sendAt before
// anything is sent or stored; nil p is no policy.
func (s *Server) checkFollowUp(p *yidu.Policy, sendAt time.Time) error {
	if p == nil {
		return nil
	}
	if s.followUps == nil {
		return errNoFollowUps
	}
	return inFollowUp(s.followUps.CheckPolicy(*p, sendAt))
}

// inFollowUp names a policy's field as a field of the posted follow_up
// ("deadline: ..." becomes "follow_up.deadline: ...").
func inFollowUp(err error) error {
	if !errors.Is(err, yidu.ErrInvalid) {
		return err
	}
	msg := strings.TrimPrefix(err.Error(), yidu.ErrInvalid.Error()+": ")
	if strings.HasPrefix(msg, "follow_up") {
		return err
	}
	return yidu.Invalidf("follow_up.%s", msg)
}

// addFollowUp sets j.FollowUp from the notice's stored policy and rounds.
func (s *Server) addFollowUp(ctx context.Context, corpID string, j *messageJSON) error {
	if s.followUps == nil {
		return nil
	}
	fu, ok, err := s.followUps.FollowUpOf(ctx, corpID, j.MsgID)
	if err != nil {
		return fmt.Errorf("dashboard: follow-up: %w", err)
	}
	if ok {
		j.FollowUp = &fu
	}
	return nil
}

// followUpAllowed answers 403 unless access lets the caller send through
// m's app unscoped (the follow-up is the whole notice's: rounds to every
// unread recipient), and 404 without a round engine; it reports whether
// the handler may go on.
func (s *Server) followUpAllowed(w http.ResponseWriter, r *http.Request, m yidu.Message) bool {
	if !s.maySend(principalFrom(r.Context()), m.CorpID, m.App) || scoped(r.Context()) {
		writeError(w, http.StatusForbidden, "your role may not manage this notice's follow-up")
		return false
	}
	if s.followUps == nil {
		writeError(w, http.StatusNotFound, "no follow-up")
		return false
	}
	return true
}

// handleGetFollowUp is GET /messages/{msgid}/follow_up: the policy, the
// next round and its time, and each round done with its effect.
func (s *Server) handleGetFollowUp(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	if !s.followUpAllowed(w, r, m) {
		return
	}
	fu, ok, err := s.followUps.FollowUpOf(r.Context(), m.CorpID, m.MsgID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !ok {
		writeError(w, http.StatusNotFound, "no follow-up policy")
		return
	}
	writeJSON(w, http.StatusOK, fu)
}

// recordFollowUp records a follow-up policy change on any route (PUT
// follow_up, PATCH, a replayed POST: issue 38) as follow_up_change.
func (s *Server) recordFollowUp(r *http.Request, corp, app, msgID string, err error) {
	ev := event(r, yidu.ActionFollowUpChange, corp, app, msgID)
	ev.Detail = "policy"
	s.recordDone(r, ev, err)
}

// handlePutFollowUp is PUT /messages/{msgid}/follow_up: set or change the
// policy of a sent notice. A policy the root's Validate refuses, or one on
// a recalled notice, is a 400 naming the field; nothing is written.
func (s *Server) handlePutFollowUp(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	if !s.followUpAllowed(w, r, m) {
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "Content-Type must be application/json")
		return
	}
	var p yidu.Policy
	if err := decodeStrict(http.MaxBytesReader(w, r.Body, 64<<10), &p); err != nil {
		s.fail(w, r, err)
		return
	}
	err := s.followUps.SetPolicy(r.Context(), m.CorpID, m.MsgID, p, principalFrom(r.Context()).name)
	s.recordFollowUp(r, m.CorpID, m.App, m.MsgID, err)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.handleGetFollowUp(w, r, m)
}

// handleCancelRound is POST /messages/{msgid}/follow_up/cancel-round: the
// round due or sending stops (after its current batch); 409 when none is.
func (s *Server) handleCancelRound(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	if !s.followUpAllowed(w, r, m) {
		return
	}
	ok, err := s.followUps.CancelRound(r.Context(), m.CorpID, m.MsgID)
	ev := event(r, yidu.ActionFollowUpChange, m.CorpID, m.App, m.MsgID)
	ev.Detail = "cancel_round"
	if err == nil && !ok {
		ev.Outcome = "refused" // 409: nothing to cancel
	}
	s.recordDone(r, ev, err)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !ok {
		writeError(w, http.StatusConflict, "no round is due or sending")
		return
	}
	s.handleGetFollowUp(w, r, m)
}
