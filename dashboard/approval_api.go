package dashboard

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/campaign/store"
)

// Approval before sending (issue 41): campaign decides whether a notice
// needs approval, who may give it and what it sends; these handlers
// translate.

// approvalJSON is what an approver sees of a notice (GET .../approval).
type approvalJSON struct {
	// State: pending (待审批), approved (已批准), rejected (已驳回), or ""
	// when the notice needs none.
	State       string `json:"state"`
	VersionHash string `json:"version_hash"`
	// Recipients is the exact number of people it reaches now;
	// Departments the top departments among them.
	Recipients  uint64                     `json:"recipients"`
	Departments []campaign.DepartmentCount `json:"departments"`
	// Notice is the notice with its follow-up policy (follow_up).
	Notice messageJSON `json:"notice"`
	// ReadingPage is the members' reading page, when the notice has one.
	ReadingPage string `json:"reading_page,omitempty"`
	// Content is the full text a notice not yet sent keeps, rendered as
	// its version 1 will be (issue 39); absent without one.
	Content *versionJSON `json:"content,omitempty"`
	// MayDecide: the caller may approve or reject this version (not its
	// author, an approver of its app).
	MayDecide bool                 `json:"may_decide"`
	Trail     []store.ApprovalStep `json:"trail"`
	// Approvers are who approves it, by name; ApproverRole the role whose
	// holders approve too ("" none).
	Approvers    []string `json:"approvers"`
	ApproverRole string   `json:"approver_role,omitempty"`
	// Mine: the caller composed it (催办, 撤回申请 are theirs).
	Mine bool `json:"mine"`
	// Standing is a standing notice's rule, which the approval covers
	// (its joiners' cards, its cycles); absent for others.
	Standing *yidu.Standing `json:"standing,omitempty"`
}

// approvalNotice is the notice of the request for an approver: its
// senders see it as always; an approver who is no sender of its app
// sees it too.
func (s *Server) approvalNotice(r *http.Request) (yidu.Notice, error) {
	id, err := parseMsgID(chi.URLParam(r, "msgid"))
	if err != nil {
		return yidu.Notice{}, err
	}
	return s.acts.ForApprover(r.Context(), principalFrom(r.Context()), id)
}

// handleGetApproval: GET /messages/{msgid}/approval.
func (s *Server) handleGetApproval(w http.ResponseWriter, r *http.Request) {
	j, err := s.approvalView(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, j)
}

// handleApprovePage: GET /approve/{msgid}, the approver's page (what
// the approval card opens).
func (s *Server) handleApprovePage(w http.ResponseWriter, r *http.Request) {
	d := pageFor(r, "approval.title")
	j, err := s.approvalView(r)
	if err != nil {
		code, _ := httpStatus(err)
		d.Error = "approval.unavailable"
		if code == http.StatusNotFound {
			d.Error = "approval.not_found"
		}
		s.render(w, code, "approve.html", d)
		return
	}
	d.Approval, d.Script = &j, "approve.js"
	s.render(w, http.StatusOK, "approve.html", d)
}

// approvalView is what the approver sees of the request's notice
// (campaign.Service.ApprovalView).
func (s *Server) approvalView(r *http.Request) (approvalJSON, error) {
	n, err := s.approvalNotice(r)
	if err != nil {
		return approvalJSON{}, err
	}
	ctx := r.Context()
	v, err := s.acts.ApprovalView(ctx, principalFrom(ctx), n)
	if err != nil {
		return approvalJSON{}, err
	}
	j := approvalJSON{State: string(n.Approval), VersionHash: n.ApprovalHash, Recipients: v.Recipients, Departments: v.Departments,
		Notice: noticeJSON(n), Trail: v.Trail, MayDecide: v.MayDecide, ReadingPage: v.ReadingPage,
		Approvers: append([]string{}, v.Approvers...), ApproverRole: string(v.ApproverRole), Standing: v.Standing}
	if p := principalFrom(ctx); p != nil && n.CreatedBy != "" && (p.Name == n.CreatedBy || p.UserID == n.CreatedBy) {
		j.Mine = true
	}
	if err := s.addFollowUp(ctx, n.App.CorpID, &j.Notice); err != nil {
		return approvalJSON{}, err
	}
	if n.Content != nil {
		v, err := s.acts.PreviewContent(ctx, n)
		if err != nil {
			return approvalJSON{}, err
		}
		c := versionOut(v, nil)
		j.Content = &c
	}
	return j, nil
}

type decideBody struct {
	Approve     bool   `json:"approve"`
	VersionHash string `json:"version_hash"`
	Reason      string `json:"reason"`
}

// handleDecide: POST /messages/{msgid}/approval {approve, version_hash,
// reason}: 批准 or 驳回 (with a reason) of the version the approver saw.
// The same decision again answers 200 with "again": true.
func (s *Server) handleDecide(w http.ResponseWriter, r *http.Request) {
	n, err := s.approvalNotice(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var b decideBody
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		writeFieldError(w, "version_hash", "body must be {approve, version_hash, reason}")
		return
	}
	got, again, acts, err := s.acts.Decide(r.Context(), principalFrom(r.Context()), n, campaign.Decision{Hash: b.VersionHash,
		Approve: b.Approve, Reason: b.Reason, Via: "page", ClientIP: s.clientIP(r), UserAgent: r.UserAgent()})
	s.recordActs(r, n.App.CorpID, n.App.Name, acts)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"notice": noticeJSON(got), "again": again})
}

// handlePreviewToMe: POST /messages/{msgid}/approval/preview, 发给我预览:
// the notice's card to the caller's own WeCom.
func (s *Server) handlePreviewToMe(w http.ResponseWriter, r *http.Request) {
	n, err := s.approvalNotice(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	to, err := s.acts.PreviewToMe(r.Context(), principalFrom(r.Context()), n)
	if errors.Is(err, campaign.ErrNoPreview) {
		writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"sent_to": to})
}

// handleNudge: POST /messages/{msgid}/approval/nudge, 催办: the approvers
// get the approval card again (at most every 10 minutes: 429).
func (s *Server) handleNudge(w http.ResponseWriter, r *http.Request) {
	n, err := s.approvalNotice(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	acts, err := s.acts.Nudge(r.Context(), principalFrom(r.Context()), n)
	s.recordActs(r, n.App.CorpID, n.App.Name, acts)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"msgid": n.MsgID, "nudged": true})
}

// handleWithdraw: POST /messages/{msgid}/approval/withdraw, 撤回申请: the
// notice goes back to a draft with no approval asked.
func (s *Server) handleWithdraw(w http.ResponseWriter, r *http.Request) {
	s.noticeAct(w, r, s.approvalNotice, s.acts.Withdraw, http.StatusOK)
}
