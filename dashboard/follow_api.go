package dashboard

import (
	"context"
	"errors"
	"mime"
	"net/http"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/campaign"
)

// addFollowUp sets j.FollowUp from the notice's stored policy and rounds.
func (s *Server) addFollowUp(ctx context.Context, corpID string, j *messageJSON) error {
	fu, ok, err := s.acts.FollowUpOf(ctx, yidu.Message{CorpID: corpID, MsgID: j.MsgID})
	if err != nil {
		return err
	}
	if ok {
		j.FollowUp = &fu
	}
	return nil
}

// handleGetFollowUp is GET /messages/{msgid}/follow_up: the policy, the
// next round and its time, and each round done with its effect, for
// whom campaign lets manage it.
func (s *Server) handleGetFollowUp(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	fu, ok, err := s.acts.FollowUp(r.Context(), principalFrom(r.Context()), m, !scoped(r.Context()))
	if failedFollowUp(w, r, s, err) {
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
	if refusedFollowUp(w, r, s, s.acts.MayFollowUp(principalFrom(r.Context()), m)) {
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
	acts, err := s.acts.SetFollowUp(r.Context(), principalFrom(r.Context()), m, p)
	s.recordActs(r, m.CorpID, m.App, acts) // a refusal (a sender's audience) included
	if failedFollowUp(w, r, s, err) {
		return
	}
	s.handleGetFollowUp(w, r, m)
}

// handleCancelRound is POST /messages/{msgid}/follow_up/cancel-round: the
// round due or sending stops (after its current batch); 409 when none is.
func (s *Server) handleCancelRound(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	ok, acts, err := s.acts.CancelRound(r.Context(), principalFrom(r.Context()), m)
	s.recordActs(r, m.CorpID, m.App, acts) // none due: refused
	if failedFollowUp(w, r, s, err) {
		return
	}
	if !ok {
		writeError(w, http.StatusConflict, "no round is due or sending")
		return
	}
	s.handleGetFollowUp(w, r, m)
}

// failedFollowUp answers a follow-up call that failed (refused, see
// refusedFollowUp, or any other error) and reports whether it did.
func failedFollowUp(w http.ResponseWriter, r *http.Request, s *Server, err error) bool {
	if refusedFollowUp(w, r, s, err) {
		return true
	}
	if err != nil {
		s.fail(w, r, err)
		return true
	}
	return false
}

// refusedFollowUp answers a follow-up change campaign refused before
// acting (403 for the caller's role, 404 without a round engine) and
// reports whether it did.
func refusedFollowUp(w http.ResponseWriter, r *http.Request, s *Server, err error) bool {
	switch {
	case errors.Is(err, campaign.ErrForbidden):
		s.fail(w, r, err)
	case errors.Is(err, campaign.ErrNoFollowUps):
		writeError(w, http.StatusNotFound, "no follow-up")
	default:
		return false
	}
	return true
}

// handleReminders is GET /messages/{msgid}/reminders: the notice's
// 提醒未读 history, each with what it achieved. Counts of the whole
// notice: a caller who sees part of it (a leader) gets 403.
func (s *Server) handleReminders(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	if scoped(r.Context()) {
		writeError(w, http.StatusForbidden, "the reminder history counts the whole notice")
		return
	}
	rs, err := s.acts.ManualReminders(r.Context(), m)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"msgid": m.MsgID, "reminders": rs})
}
