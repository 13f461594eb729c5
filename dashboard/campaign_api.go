package dashboard

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/dashboard/internal/handle"
)

// DefaultConfirmOver is dashboard.confirm_over's default: above it the
// page asks the person to type the recipient count.
const DefaultConfirmOver = 1000

// noticeFields are the message JSON fields of a notice sent from yidu
// (CONTRACT.md, Campaign); every message has them ("sent" for one
// registered through the API).
type noticeFields struct {
	State       string        `json:"state"`
	SendAt      *time.Time    `json:"send_at"`
	SentLateBy  int64         `json:"sent_late_by"`
	StateReason string        `json:"state_reason"`
	Audience    *audienceJSON `json:"audience,omitempty"`
	// Approval is pending (待审批), approved (已批准) or rejected (已驳回)
	// for a notice that needs approval (issue 41); absent otherwise.
	Approval     string `json:"approval,omitempty"`
	ApprovalHash string `json:"approval_hash,omitempty"`
	// Content is the full text a notice not yet sent keeps, with its
	// read rule (issue 39); absent without one, in list rows, and once
	// sent (GET .../content has its versions).
	Content        *contentJSON `json:"content,omitempty"`
	ReadRule       string       `json:"read_rule,omitempty"`
	MinReadSeconds *int         `json:"min_read_seconds,omitempty"`
}

// audienceJSON is the audience object of a registration (handle's).
type audienceJSON = handle.AudienceJSON

var toAudienceJSON = handle.ToAudienceJSON

// setNotice copies n's state into j.
func (j *messageJSON) setNotice(n yidu.Notice) {
	j.State = string(n.State)
	if !n.SendAt.IsZero() {
		at := n.SendAt.UTC()
		j.SendAt = &at
	}
	j.SentLateBy = int64(n.SentLateBy / time.Second)
	j.StateReason = n.Reason
	j.Audience = toAudienceJSON(n.Audience)
	j.Approval, j.ApprovalHash = string(n.Approval), n.ApprovalHash
}

// noticeJSON is a notice that is not registered yet (draft, scheduled,
// held, cancelled, failed before registering): no recipients, no progress;
// sent_at is when it started sending, else its send_at, else (a draft)
// when it was saved.
func noticeJSON(n yidu.Notice) messageJSON {
	j := messageJSON{MsgID: n.MsgID, CorpID: n.App.CorpID, App: n.App.Name, AgentID: n.App.AgentID,
		Title: n.Title, Body: n.Body, URL: n.URL, SentAt: cmp.Or(n.StartedAt, n.SendAt, n.CreatedAt).UTC()}
	j.setNotice(n)
	if c := n.Content; c != nil && n.State.Editable() {
		min := c.MinReadSeconds
		j.Content = &contentJSON{Markdown: c.Markdown, Attachments: handle.NonNil(c.Attachments)}
		j.ReadRule, j.MinReadSeconds = string(c.ReadRule), &min
	}
	return j
}

// sentOrNotice answers a registered message with sent; otherwise it
// finds the notice not yet registered. false: answered.
func (s *Server) sentOrNotice(w http.ResponseWriter, r *http.Request, sent func(http.ResponseWriter, *http.Request, yidu.Message)) (yidu.Notice, *http.Request, bool) {
	m, r, err := s.gate(r)
	if err == nil {
		sent(w, r, m)
		return yidu.Notice{}, r, false
	}
	if !errors.Is(err, errNotFound) {
		s.fail(w, r, err)
		return yidu.Notice{}, r, false
	}
	n, err := s.notice(r)
	if err != nil {
		s.fail(w, r, err)
		return yidu.Notice{}, r, false
	}
	return n, r, true
}

// handleGetNotice is GET /messages/{msgid}: a registered message as
// before (with its state when campaign sent it), else a notice not yet
// registered.
func (s *Server) handleGetNotice(w http.ResponseWriter, r *http.Request) {
	n, r, ok := s.sentOrNotice(w, r, s.handleGetMessage)
	if !ok {
		return
	}
	j := noticeJSON(n)
	if err := s.addFollowUp(r.Context(), n.App.CorpID, &j); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, j)
}

// notice finds the notice of the route's msgid the caller may see
// (campaign.Service.Notice decides).
func (s *Server) notice(r *http.Request) (yidu.Notice, error) {
	id, err := parseMsgID(chi.URLParam(r, "msgid"))
	if err != nil {
		return yidu.Notice{}, err
	}
	return s.acts.Notice(r.Context(), principalFrom(r.Context()), id)
}

// addNotice adds the campaign state of a registered message to j ("sent"
// for a message registered through the API without campaign;
// campaign.Service.Sent).
func (s *Server) addNotice(ctx context.Context, p *access.Principal, j *messageJSON) error {
	j.State = string(yidu.StateSent)
	n, found, audience, err := s.acts.Sent(ctx, p, j.CorpID, j.MsgID)
	if err != nil || !found {
		return err
	}
	j.setNotice(n)
	if !audience {
		j.Audience = nil
	}
	return nil
}

// patchBody is PATCH /messages/{msgid}: the fields of POST, each optional.
type patchBody struct {
	Title    *string          `json:"title"`
	Body     *string          `json:"body"`
	URL      *string          `json:"url"`
	Audience *audienceJSON    `json:"audience"`
	SendAt   *json.RawMessage `json:"send_at"`
	Draft    *bool            `json:"draft"`
	// FollowUp replaces the notice's follow-up policy.
	FollowUp *yidu.Policy `json:"follow_up"`
	// Content and Reacknowledge make a sent notice's next version
	// (content_api.go); Content, ReadRule and MinReadSeconds replace the
	// full text a notice not yet sent keeps.
	Content        *contentJSON `json:"content"`
	Reacknowledge  *bool        `json:"reacknowledge"`
	ChangeNote     *string      `json:"change_note"`
	ReadRule       *string      `json:"read_rule"`
	MinReadSeconds *int         `json:"min_read_seconds"`
}

func (s *Server) handlePatchNotice(w http.ResponseWriter, r *http.Request) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "Content-Type must be application/json")
		return
	}
	n, err := s.noticeOrSent(r)
	if err != nil && !errors.Is(err, yidu.ErrNotEditable) {
		s.fail(w, r, err)
		return
	}
	var b patchBody
	if derr := decodeStrict(http.MaxBytesReader(w, r.Body, maxRegisterBody), &b); derr != nil {
		s.failBody(w, r, derr)
		return
	}
	unsent := err == nil && n.State.Editable()
	if (b.Content != nil || b.Reacknowledge != nil || b.ChangeNote != nil || b.ReadRule != nil || b.MinReadSeconds != nil) && !unsent {
		s.patchContent(w, r, b)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p, err := b.patch()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out, acts, err := s.acts.Edit(r.Context(), principalFrom(r.Context()), n, p, b.FollowUp)
	s.recordActs(r, n.App.CorpID, n.App.Name, acts)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if b.FollowUp != nil {
		s.handleGetNotice(w, r)
		return
	}
	writeJSON(w, http.StatusOK, noticeJSON(out))
}

// patch is the campaign edit of b's fields other than follow_up
// (campaign merges content, read_rule and min_read_seconds into the
// full text the notice keeps).
func (b patchBody) patch() (yidu.Patch, error) {
	p := yidu.Patch{Title: b.Title, Body: b.Body, URL: b.URL, ReadRule: (*yidu.ReadRule)(b.ReadRule), MinReadSeconds: b.MinReadSeconds}
	if b.Reacknowledge != nil {
		return p, yidu.Fieldf("reacknowledge", "reacknowledge: only a sent notice's new version is material or not")
	}
	if b.ChangeNote != nil {
		return p, yidu.Fieldf("change_note", "change_note: only a sent notice's new version has a change note")
	}
	if b.Content != nil {
		p.Content = &yidu.NoticeContent{Markdown: b.Content.Markdown, Attachments: b.Content.Attachments}
	}
	if b.Audience != nil {
		au := b.Audience.Audience()
		p.Audience = &au
	}
	sendAt, err := bodyTime("send_at", b.SendAt)
	if err != nil {
		return p, err
	}
	if sendAt != nil || b.Draft != nil {
		sc := yidu.Schedule{Draft: b.Draft != nil && *b.Draft}
		if sendAt != nil {
			sc.SendAt = *sendAt
		}
		p.Schedule = &sc
	}
	return p, nil
}

// noticeOrSent is notice, with a message registered outside campaign
// answered 409 (it is sent: nothing to edit) rather than 404, and one the
// caller may see but not act on (a viewer, a leader, a sender of another
// app who views its departments) refused by gate: 403 and the route's
// act's audit row.
func (s *Server) noticeOrSent(r *http.Request) (yidu.Notice, error) {
	n, err := s.notice(r)
	if errors.Is(err, yidu.ErrNotFound) || errors.Is(err, errNotFound) {
		switch _, _, merr := s.gate(r); {
		case merr == nil:
			return n, fmt.Errorf("%w: the message is sent", yidu.ErrNotEditable)
		case errors.Is(merr, access.ErrRefused):
			return n, merr
		}
	}
	return n, err
}

func (s *Server) handleCancelNotice(w http.ResponseWriter, r *http.Request) {
	s.noticeAct(w, r, s.noticeOrSent, s.acts.Cancel, http.StatusOK)
}

// handleSendNotice: send now, the notice is sent by campaign's Runner at
// once.
func (s *Server) handleSendNotice(w http.ResponseWriter, r *http.Request) {
	s.noticeAct(w, r, s.noticeOrSent, s.acts.SendNow, http.StatusAccepted)
}

// noticeAct answers an act that turns one notice into another: load
// finds the request's notice, act does it as the caller, the audit rows
// it is due are written whether it succeeded or not, and the notice it
// leaves is answered with status.
func (s *Server) noticeAct(w http.ResponseWriter, r *http.Request, load func(*http.Request) (yidu.Notice, error),
	act func(context.Context, *access.Principal, yidu.Notice) (yidu.Notice, []campaign.Act, error), status int) {
	n, err := load(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out, acts, err := act(r.Context(), principalFrom(r.Context()), n)
	s.recordActs(r, n.App.CorpID, n.App.Name, acts)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, status, noticeJSON(out))
}

// listNotices is GET /messages?state= for a state other than sent.
func (s *Server) listNotices(w http.ResponseWriter, r *http.Request, state yidu.NoticeState) {
	l, err := parseListQuery(r.URL.Query(), true)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := listJSON{Messages: []messageJSON{}}
	ns, next, err := s.acts.Notices(r.Context(), principalFrom(r.Context()), state, l.title, l.app, l.cursor, l.limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, n := range ns {
		j := noticeJSON(n)
		j.Content, j.ReadRule, j.MinReadSeconds = nil, "", nil // the list stays light
		out.Messages = append(out.Messages, j)
	}
	out.NextCursor = next
	writeJSON(w, http.StatusOK, out)
}

// parseNoticeState reads ?state=: empty, or a notice state.
func parseNoticeState(s string) (yidu.NoticeState, error) {
	st := yidu.NoticeState(s)
	if s != "" && !st.Valid() {
		return "", badParam("state must be one of draft, scheduled, sending, sent, cancelled, failed, held")
	}
	return st, nil
}

// appJSON is one app the principal may send from.
type appJSON struct {
	Name        string `json:"name"`
	CorpID      string `json:"corp_id"`
	AgentID     int64  `json:"agent_id"`
	Timezone    string `json:"timezone"`
	ConfirmOver int    `json:"confirm_over"`
	// FollowUp is the app's default follow-up policy (apps[].follow_up),
	// which the compose page starts from; absent: none, or the
	// deployment runs no follow-ups.
	FollowUp *yidu.Policy `json:"follow_up,omitempty"`
}

func (s *Server) handleApps(w http.ResponseWriter, r *http.Request) {
	p := principalFrom(r.Context())
	out := struct {
		Apps []appJSON `json:"apps"`
	}{Apps: []appJSON{}}
	for _, a := range p.SendApps(s.appList) { // only the apps p may send from
		j := appJSON{Name: a.Name, CorpID: a.CorpID, AgentID: a.AgentID, Timezone: cmp.Or(a.Timezone, yidu.DefaultTimezone), ConfirmOver: s.confirmOver}
		j.FollowUp = s.acts.DefaultFollowUp(a, false)
		out.Apps = append(out.Apps, j)
	}
	writeJSON(w, http.StatusOK, out)
}

// decodeStrict decodes one JSON object, refusing unknown fields.
var decodeStrict = handle.DecodeStrict

// fieldOf is the JSON field a validation error names: the root's and
// the services' typed errors carry it (yidu.FieldError, StandingError).
func fieldOf(err error) string {
	if fe := (*yidu.FieldError)(nil); errors.As(err, &fe) {
		return fe.Field
	}
	if se := (*yidu.StandingError)(nil); errors.As(err, &se) {
		return se.Field
	}
	return ""
}

// failBody answers a POST or PATCH /messages body that did not decode; one
// over maxRegisterBody can only be its audience's UserIDs (every other
// field is bounded far below), so the 413 names the audience.
func (s *Server) failBody(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, errTooLarge) {
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"field": "audience",
			"error": fmt.Sprintf("audience too large: the body is over %d bytes (at most %d UserIDs)", maxRegisterBody, yidu.MaxUserIDs)})
		return
	}
	s.fail(w, r, err)
}
