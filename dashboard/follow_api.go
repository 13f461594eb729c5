package dashboard

import (
	"context"
	"mime"
	"net/http"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/campaign"
)

// FollowUps keeps notices' follow-up policies and reports their rounds
// (campaign.Rounds, issue 30).
type FollowUps interface {
	SetPolicy(ctx context.Context, corpID, msgID string, p yidu.Policy, by string) error
	FollowUpOf(ctx context.Context, corpID, msgID string) (campaign.FollowUp, bool, error)
	CancelRound(ctx context.Context, corpID, msgID string) (bool, error)
}

// handleGetFollowUp is GET /messages/{msgid}/follow_up: the policy, the
// next round and its time, and each round done with its effect.
func (s *Server) handleGetFollowUp(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	if s.followUps == nil {
		writeError(w, http.StatusNotFound, "no follow-up")
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

// handlePutFollowUp is PUT /messages/{msgid}/follow_up: set or change the
// policy of a sent notice. A policy the root's Validate refuses, or one on
// a recalled notice, is a 400 naming the field; nothing is written.
func (s *Server) handlePutFollowUp(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	if s.followUps == nil {
		writeError(w, http.StatusNotFound, "no follow-up")
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
	ev := event(r, yidu.ActionFollowUpChange, m.CorpID, m.App, m.MsgID)
	ev.Detail = "policy"
	s.recordDone(r, ev, err)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.handleGetFollowUp(w, r, m)
}

// handleCancelRound is POST /messages/{msgid}/follow_up/cancel-round: the
// round due or sending stops (after its current batch); 409 when none is.
func (s *Server) handleCancelRound(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	if s.followUps == nil {
		writeError(w, http.StatusNotFound, "no follow-up")
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
