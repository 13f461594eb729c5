package compose

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/dashboard/internal/handle"
)

// Templates (issue 41, 从模板新建): campaign decides who may use and
// change them (campaign.Service's ListTemplates … DeleteTemplate over
// campaign/store.Templates); these handlers translate.

// TemplateJSON is a template in the API.
type TemplateJSON struct {
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

func toTemplateJSON(t yidu.Template) TemplateJSON {
	at := t.UpdatedAt.UTC()
	return TemplateJSON{ID: t.ID, App: t.App.Name, Name: t.Name, Title: t.Title, Body: t.Body, URL: t.URL,
		Audience: handle.ToAudienceJSON(t.Audience), FollowUp: t.FollowUp, Markdown: t.Markdown, Attachments: handle.NonNil(t.Attachments),
		ReadRule: string(t.ReadRule), MinReadSeconds: t.MinReadSeconds, UpdatedBy: t.UpdatedBy, UpdatedAt: &at}
}

// HandleListTemplates: GET /templates?app=.
func (s *Handlers) HandleListTemplates(w http.ResponseWriter, r *http.Request) {
	app, ok := s.appOf(w, r, r.URL.Query().Get("app"))
	if !ok {
		return
	}
	list, err := s.Acts.ListTemplates(r.Context(), principalFrom(r.Context()), app)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	out := make([]TemplateJSON, 0, len(list))
	for _, t := range list {
		out = append(out, toTemplateJSON(t))
	}
	writeJSON(w, http.StatusOK, map[string]any{"templates": out})
}

// decodeTemplate reads a template body for a create (update false) or
// an update; its app must be one the caller may send through (appOf).
func (s *Handlers) decodeTemplate(w http.ResponseWriter, r *http.Request, update bool) (yidu.Template, bool) {
	var b TemplateJSON
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, handle.MaxRegisterBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		writeFieldError(w, "name", "body must be a template object")
		return yidu.Template{}, false
	}
	// campaign decides who may change the app's templates, and the row
	// a refusal is due; one of an app the caller may not send through
	// is answered as an unknown app (issue 46).
	var refused error
	if a, known := s.apps[b.App]; known {
		var acts []campaign.Act
		acts, refused = campaign.TemplateChange(principalFrom(r.Context()), a, update)
		s.RecordActs(r, a.CorpID, a.Name, acts)
	}
	app, ok := s.appOf(w, r, b.App)
	if !ok {
		return yidu.Template{}, false
	}
	if refused != nil {
		s.Fail(w, r, refused)
		return yidu.Template{}, false
	}
	t := yidu.Template{App: app, Name: b.Name, Title: b.Title, Body: b.Body, URL: b.URL, FollowUp: b.FollowUp,
		Markdown: b.Markdown, Attachments: b.Attachments, ReadRule: yidu.ReadRule(b.ReadRule), MinReadSeconds: b.MinReadSeconds}
	if b.Audience != nil {
		t.Audience = b.Audience.Audience()
	}
	return t, true
}

// HandleCreateTemplate: POST /templates.
func (s *Handlers) HandleCreateTemplate(w http.ResponseWriter, r *http.Request) {
	t, ok := s.decodeTemplate(w, r, false)
	if !ok {
		return
	}
	got, acts, err := s.Acts.CreateTemplate(r.Context(), principalFrom(r.Context()), t)
	s.RecordActs(r, t.App.CorpID, t.App.Name, acts)
	if err != nil {
		s.Fail(w, r, err)
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

// HandleTemplate: GET, PUT and DELETE /templates/{id}; GET and PUT
// answer the attachments' names and sizes, so a notice made from it
// shows and carries them again (从模板新建).
func (s *Handlers) HandleTemplate(w http.ResponseWriter, r *http.Request) {
	id, err := templateID(r)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	p := principalFrom(r.Context())
	var got yidu.Template
	var files []attachment.Attachment
	switch r.Method {
	case http.MethodGet:
		got, files, err = s.Acts.Template(r.Context(), p, id)
	case http.MethodPut:
		t, ok := s.decodeTemplate(w, r, true)
		if !ok {
			return
		}
		var acts []campaign.Act
		got, files, acts, err = s.Acts.UpdateTemplate(r.Context(), p, id, t)
		s.RecordActs(r, t.App.CorpID, t.App.Name, acts)
	case http.MethodDelete:
		var acts []campaign.Act
		acts, err = s.Acts.DeleteTemplate(r.Context(), p, id)
		s.RecordActs(r, "", "", acts) // its app is not asked of a delete
		if err == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	j := toTemplateJSON(got)
	j.AttachmentFiles = files
	writeJSON(w, http.StatusOK, j)
}
