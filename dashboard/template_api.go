package dashboard

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/campaign"
)

// Templates (issue 41, 从模板新建): campaign.Templates decides who may
// use and change them; these handlers translate.

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

// templates answers 503 when the server keeps no templates.
func (s *Server) templates(w http.ResponseWriter) (*campaign.Templates, bool) {
	if s.tpls == nil {
		writeError(w, http.StatusServiceUnavailable, "templates are not configured")
		return nil, false
	}
	return s.tpls, true
}

// handleListTemplates: GET /templates?app=.
func (s *Server) handleListTemplates(w http.ResponseWriter, r *http.Request) {
	app, ok := s.appOf(w, r, r.URL.Query().Get("app"))
	if !ok {
		return
	}
	ts := s.tpls
	if ts == nil {
		// A server without templates has none to offer.
		writeJSON(w, http.StatusOK, map[string]any{"templates": []templateJSON{}})
		return
	}
	list, err := ts.List(r.Context(), principalFrom(r.Context()), app)
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
	ts, ok := s.templates(w)
	if !ok {
		return
	}
	t, ok := s.decodeTemplate(w, r)
	if !ok {
		return
	}
	got, err := ts.Create(r.Context(), principalFrom(r.Context()), t)
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

// handleTemplate: GET, PUT and DELETE /templates/{id}.
func (s *Server) handleTemplate(w http.ResponseWriter, r *http.Request) {
	ts, ok := s.templates(w)
	if !ok {
		return
	}
	id, err := templateID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p := principalFrom(r.Context())
	var got yidu.Template
	switch r.Method {
	case http.MethodGet:
		got, err = ts.Get(r.Context(), p, id)
	case http.MethodPut:
		t, ok := s.decodeTemplate(w, r)
		if !ok {
			return
		}
		got, err = ts.Update(r.Context(), p, id, t)
	case http.MethodDelete:
		if err = ts.Delete(r.Context(), p, id); err == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	if errors.Is(err, yidu.ErrNotFound) {
		err = errNotFound
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	j := toTemplateJSON(got)
	// The attachments' names and sizes, so a notice made from it shows
	// and carries them again (从模板新建).
	if j.AttachmentFiles, err = ts.Files(r.Context(), got); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, j)
}
