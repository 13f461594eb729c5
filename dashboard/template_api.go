package dashboard

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/attachment"
)

// Templates (issue 41, 从模板新建): campaign decides who may use and
// change them (campaign.Service's ListTemplates … DeleteTemplate over
// campaign.Templates); these handlers translate.

// templateJSON is a template in the API.
type templateJSON struct {
	ID          int64         `json:"id"`
	App         string        `json:"app"`
	Name        string        `json:"name"`
	Title       string        `json:"title"`
	Body        string        `json:"body"`
	URL         string        `json:"url"`
	Audience    *audienceJSON `json:"audience"`
	FollowUp    *yidu.Policy  `json:"follow_up"`
	Markdown    string        `json:"markdown"`
	Attachments []string      `json:"attachments"`
	// AttachmentFiles describes Attachments (GET /templates/{id} only;
	// ignored when posted).
	AttachmentFiles []attachment.Attachment `json:"attachment_files,omitempty"`
	ReadRule        string                  `json:"read_rule"`
	MinReadSeconds  int                     `json:"min_read_seconds"`
	UpdatedBy       string                  `json:"updated_by,omitempty"`
	UpdatedAt       *time.Time              `json:"updated_at,omitempty"`
}

func toTemplateJSON(t yidu.Template) templateJSON {
	at := t.UpdatedAt.UTC()
	return templateJSON{ID: t.ID, App: t.App.Name, Name: t.Name, Title: t.Title, Body: t.Body, URL: t.URL,
		Audience: toAudienceJSON(t.Audience), FollowUp: t.FollowUp, Markdown: t.Markdown, Attachments: nonNil(t.Attachments),
		ReadRule: string(t.ReadRule), MinReadSeconds: t.MinReadSeconds, UpdatedBy: t.UpdatedBy, UpdatedAt: &at}
}

// handleListTemplates: GET /templates?app=.
func (s *Server) handleListTemplates(w http.ResponseWriter, r *http.Request) {
	app, ok := s.appOf(w, r, r.URL.Query().Get("app"))
	if !ok {
		return
	}
	list, err := s.acts.ListTemplates(r.Context(), principalFrom(r.Context()), app)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]templateJSON, 0, len(list))
	for _, t := range list {
		out = append(out, toTemplateJSON(t))
	}
	writeJSON(w, http.StatusOK, map[string]any{"templates": out})
}

// decodeTemplate reads a template body; its app must be one the caller
// may send through (appOf).
func (s *Server) decodeTemplate(w http.ResponseWriter, r *http.Request) (yidu.Template, bool) {
	var b templateJSON
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRegisterBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		writeFieldError(w, "name", "body must be a template object")
		return yidu.Template{}, false
	}
	app, ok := s.appOf(w, r, b.App)
	if !ok {
		return yidu.Template{}, false
	}
	t := yidu.Template{App: app, Name: b.Name, Title: b.Title, Body: b.Body, URL: b.URL, FollowUp: b.FollowUp,
		Markdown: b.Markdown, Attachments: b.Attachments, ReadRule: yidu.ReadRule(b.ReadRule), MinReadSeconds: b.MinReadSeconds}
	if b.Audience != nil {
		t.Audience = b.Audience.audience()
	}
	return t, true
}

// handleCreateTemplate: POST /templates.
func (s *Server) handleCreateTemplate(w http.ResponseWriter, r *http.Request) {
	t, ok := s.decodeTemplate(w, r)
	if !ok {
		return
	}
	got, err := s.acts.CreateTemplate(r.Context(), principalFrom(r.Context()), t)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, toTemplateJSON(got))
}

func templateID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, errNotFound
	}
	return id, nil
}

// handleTemplate: GET, PUT and DELETE /templates/{id}; GET and PUT
// answer the attachments' names and sizes, so a notice made from it
// shows and carries them again (从模板新建).
func (s *Server) handleTemplate(w http.ResponseWriter, r *http.Request) {
	id, err := templateID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p := principalFrom(r.Context())
	var got yidu.Template
	var files []attachment.Attachment
	switch r.Method {
	case http.MethodGet:
		got, files, err = s.acts.Template(r.Context(), p, id)
	case http.MethodPut:
		t, ok := s.decodeTemplate(w, r)
		if !ok {
			return
		}
		got, files, err = s.acts.UpdateTemplate(r.Context(), p, id, t)
	case http.MethodDelete:
		if err = s.acts.DeleteTemplate(r.Context(), p, id); err == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	j := toTemplateJSON(got)
	j.AttachmentFiles = files
	writeJSON(w, http.StatusOK, j)
}
