package dashboard

import (
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/content"
	"github.com/yidu-io/yidu/notice"
)

// contentJSON is a body's "content".
type contentJSON struct {
	Markdown    string   `json:"markdown"`
	Attachments []string `json:"attachments"`
}

// versionJSON is one version as GET .../content answers it.
type versionJSON struct {
	Version        int                     `json:"version"`
	Versions       int                     `json:"versions"`
	Material       int                     `json:"material_version"`
	Title          string                  `json:"title"`
	Markdown       string                  `json:"markdown"`
	HTML           string                  `json:"html"`
	Attachments    []attachment.Attachment `json:"attachments"`
	SHA256         string                  `json:"sha256"`
	Reacknowledge  bool                    `json:"reacknowledge"`
	ReadRule       yidu.ReadRule           `json:"read_rule"`
	MinReadSeconds int                     `json:"min_read_seconds"`
	CreatedBy      string                  `json:"created_by"`
	CreatedAt      time.Time               `json:"created_at"`
	// ChangeNote is the publisher's note on what changed ("": none).
	ChangeNote string `json:"change_note"`
	// ByVersion is the reading page's signals per version (page_signals):
	// progress per version, for a caller who sees the whole notice.
	ByVersion []notice.VersionCounts `json:"by_version,omitempty"`
	// Approval is "pending" for a material version held for approval
	// (202): not published, nobody told, until approved (issue 46);
	// VersionHash is the version the approvers are asked for.
	Approval    string `json:"approval,omitempty"`
	VersionHash string `json:"version_hash,omitempty"`
}

func versionOut(v notice.Version, all []notice.Version) versionJSON {
	atts := v.Attachments
	if atts == nil {
		atts = []attachment.Attachment{}
	}
	return versionJSON{Version: v.N, Versions: len(all), Material: notice.Material(all), Title: v.Title, Markdown: v.Markdown,
		HTML: v.HTML, Attachments: atts, SHA256: v.SHA256.String(), Reacknowledge: v.Reacknowledge,
		ReadRule: v.Settings.ReadRule, MinReadSeconds: v.Settings.MinReadSeconds, CreatedBy: v.CreatedBy, CreatedAt: v.CreatedAt,
		ChangeNote: v.Note}
}

// patchContent is PATCH /messages/{msgid} with "content" (and optionally
// "title", "reacknowledge" and "change_note") of a sent notice: version
// N+1.
func (s *Server) patchContent(w http.ResponseWriter, r *http.Request, b patchBody) {
	m, r, err := s.gate(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	other := b.Content == nil || b.Body != nil || b.URL != nil || b.Audience != nil || b.SendAt != nil || b.Draft != nil ||
		b.FollowUp != nil || b.ReadRule != nil || b.MinReadSeconds != nil
	rev := campaign.Revision{Title: b.Title, Reacknowledge: b.Reacknowledge != nil && *b.Reacknowledge, ChangeNote: b.ChangeNote,
		Other: other, NoContent: b.Content == nil}
	if b.Content != nil {
		rev.Markdown, rev.Attachments = b.Content.Markdown, b.Content.Attachments
	}
	res, err := s.acts.Revise(r.Context(), principalFrom(r.Context()), m, !scoped(r.Context()), rev)
	s.recordActs(r, m.CorpID, m.App, res.Acts)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := versionOut(res.Version, res.All)
	if res.Pending {
		out.Approval, out.VersionHash = string(yidu.ApprovalPending), res.Hash
		writeJSON(w, http.StatusAccepted, out)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// handleContent is GET /messages/{msgid}/content: a sent notice's
// versions (handleGetContent), else the full text a notice not yet sent
// keeps, rendered as its version 1 will be ("versions": 0; the compose
// page's and the approver's preview).
func (s *Server) handleContent(w http.ResponseWriter, r *http.Request) {
	n, r, ok := s.sentOrNotice(w, r, s.handleGetContent)
	if !ok {
		return
	}
	if n.Content == nil {
		s.fail(w, r, errNotFound)
		return
	}
	v, err := s.acts.PreviewContent(r.Context(), n)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, versionOut(v, nil))
}

// handleGetContent is GET /messages/{msgid}/content?v=N: version N of the
// notice's content (the current one without v).
func (s *Server) handleGetContent(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	n := 0
	if q := r.URL.Query().Get("v"); q != "" {
		var err error
		if n, err = strconv.Atoi(q); err != nil || n < 1 || len(q) > 9 {
			s.fail(w, r, badParam("v is a version number, 1 or more"))
			return
		}
	}
	c, err := s.acts.Content(r.Context(), m, n, !scoped(r.Context()))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := versionOut(c.Version, c.All)
	out.ByVersion = c.ByVersion
	writeJSON(w, http.StatusOK, out)
}

// handlePreviewContent is POST /api/v1/content/preview {"markdown": "…"}:
// the text as the reading page will show it, rendered and sanitized by the
// same code (the compose page's live preview). It writes nothing.
func (s *Server) handlePreviewContent(w http.ResponseWriter, r *http.Request) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "Content-Type must be application/json")
		return
	}
	var b struct {
		Markdown string `json:"markdown"`
	}
	if err := decodeStrict(http.MaxBytesReader(w, r.Body, content.MaxMarkdown*6+64), &b); err != nil {
		s.failBody(w, r, err)
		return
	}
	html, err := content.Render(b.Markdown)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"html": html})
}
