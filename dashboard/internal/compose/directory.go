package compose

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/dashboard/internal/handle"
)

// Bounds of the directory endpoints' input.
const (
	maxSearchQuery  = 64      // characters of q
	maxSearchLimit  = 100     // people per search
	maxPreviewBody  = 8 << 20 // as POST /messages: yidu.MaxUserIDs quoted UserIDs
	maxParseListLen = 8 << 20
)

// writeFieldError answers a validation error naming its field.
var writeFieldError = handle.WriteFieldError

// appOf resolves the app named by a request for the principal: an app of
// a granted corp (apps the principal may use), else a 400 on "app".
func (s *Handlers) appOf(w http.ResponseWriter, r *http.Request, name string) (yidu.App, bool) {
	app, ok := s.apps[name]
	if !ok || !s.mayCompose(r, app) {
		writeFieldError(w, "app", "app: unknown app "+strconv.Quote(yidu.Truncate(name, 64)))
		return yidu.App{}, false
	}
	return app, true
}

// mayCompose reports whether access lets r's principal compose through
// app (the directory's picker, the templates serve composing).
func (s *Handlers) mayCompose(r *http.Request, app yidu.App) bool {
	return handle.Decide(r, yidu.ActionCompose, access.Target{Corp: app.CorpID, App: app.Name}).Allowed
}

// picker is what the caller may pick from the query's app's directory
// (campaign.Picker).
func (s *Handlers) picker(w http.ResponseWriter, r *http.Request) (campaign.Picker, bool) {
	app, ok := s.appOf(w, r, r.URL.Query().Get("app"))
	if !ok {
		return campaign.Picker{}, false
	}
	pk, err := s.Acts.Picker(r.Context(), principalFrom(r.Context()), app)
	if err != nil {
		s.Fail(w, r, err)
		return campaign.Picker{}, false
	}
	return pk, true
}

// DepartmentJSON is a department of the picker.
type DepartmentJSON struct {
	ID       int64    `json:"id"`
	ParentID int64    `json:"parent_id"`
	Name     string   `json:"name"`
	Members  int      `json:"members"`
	Leaders  []string `json:"leaders"`
}

// HandleDirectoryDepartments: GET /api/v1/directory/departments?app=.
func (s *Handlers) HandleDirectoryDepartments(w http.ResponseWriter, r *http.Request) {
	pk, ok := s.picker(w, r)
	if !ok {
		return
	}
	nodes := pk.Departments()
	out := make([]DepartmentJSON, 0, len(nodes))
	for _, d := range nodes {
		out = append(out, DepartmentJSON{ID: d.ID, ParentID: d.ParentID, Name: d.Name, Members: d.Members, Leaders: append([]string{}, d.Leaders...)})
	}
	// everyone: whether 全员 may be picked (issue 41).
	writeJSON(w, http.StatusOK, map[string]any{"departments": out, "everyone": pk.Everyone()})
}

// TagJSON is a tag of the picker.
type TagJSON struct {
	ID      int64  `json:"id"`
	Name    string `json:"name"`
	Members int    `json:"members"`
}

// HandleDirectoryTags: GET /api/v1/directory/tags?app=.
func (s *Handlers) HandleDirectoryTags(w http.ResponseWriter, r *http.Request) {
	pk, ok := s.picker(w, r)
	if !ok {
		return
	}
	out := []TagJSON{}
	for _, t := range pk.Tags() {
		out = append(out, TagJSON{ID: t.ID, Name: t.Name, Members: t.Members})
	}
	writeJSON(w, http.StatusOK, map[string]any{"tags": out})
}

// PersonJSON is a person of the picker.
type PersonJSON struct {
	UserID      string  `json:"userid"`
	Name        string  `json:"name"`
	Departments []int64 `json:"departments"`
}

// HandleDirectoryPeople: GET /api/v1/directory/people?app=&q=&limit=.
func (s *Handlers) HandleDirectoryPeople(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	query := q.Get("q")
	if !utf8.ValidString(query) || utf8.RuneCountInString(query) > maxSearchQuery {
		writeFieldError(w, "q", "q must be UTF-8, at most "+strconv.Itoa(maxSearchQuery)+" characters")
		return
	}
	limit := 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxSearchLimit {
			writeFieldError(w, "limit", "limit must be 1.."+strconv.Itoa(maxSearchLimit))
			return
		}
		limit = n
	}
	pk, ok := s.picker(w, r)
	if !ok {
		return
	}
	found, err := pk.People(r.Context(), query, limit)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	out := []PersonJSON{}
	for _, p := range found {
		out = append(out, PersonJSON{UserID: p.UserID, Name: p.Name, Departments: append([]int64{}, p.Departments...)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"people": out})
}

type previewBody struct {
	App      string       `json:"app"`
	Audience audienceJSON `json:"audience"`
	// ReadRule is the notice's read rule, when the page knows it: an
	// app may ask approval of notices asking for an acknowledgement.
	ReadRule yidu.ReadRule `json:"read_rule,omitempty"`
}

// approvalNeedJSON says whether a notice to the previewed audience
// needs approval before it is sent, and who approves it.
type approvalNeedJSON struct {
	Needed    bool     `json:"needed"`
	Approvers []string `json:"approvers"`
	// Role: every admin (or sender) of the app approves too; "" none.
	Role string `json:"role,omitempty"`
}

// HandleAudiencePreview: POST /api/v1/audience/preview. It validates the
// audience with the registration's rule (yidu.Audience.Validate), expands it with the registration's expansion, and
// writes nothing.
func (s *Handlers) HandleAudiencePreview(w http.ResponseWriter, r *http.Request) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "Content-Type must be application/json")
		return
	}
	var b previewBody
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxPreviewBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeFieldError(w, "audience", "audience: body over "+strconv.Itoa(maxPreviewBody)+" bytes")
			return
		}
		writeFieldError(w, "audience", "body must be a JSON object {app, audience}")
		return
	}
	app, ok := s.appOf(w, r, b.App)
	if !ok {
		return
	}
	au := b.Audience.Audience()
	if err := au.Validate(); err != nil {
		writeFieldError(w, "audience", err.Error())
		return
	}
	pv, err := s.Acts.Preview(r.Context(), principalFrom(r.Context()), app, au)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	need, _, err := s.Acts.NeedsApprovalFor(r.Context(), app, au, b.ReadRule)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	ap := approvalNeedJSON{Needed: need, Approvers: []string{}}
	if need {
		names, role := s.Acts.Approvers(r.Context(), app, principalFrom(r.Context()).Name)
		ap.Approvers, ap.Role = append(ap.Approvers, names...), string(role)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"recipients": pv.Recipients, "unknown_userids": pv.Unknown, "left": pv.Left, "departments": pv.Departments,
		"approval": ap,
	})
}

// HandleParseList: POST /api/v1/audience/parse-list?app=, a text/plain
// or text/csv body of UserIDs (one per line; a CSV's first column).
func (s *Handlers) HandleParseList(w http.ResponseWriter, r *http.Request) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || (mt != "text/plain" && mt != "text/csv") {
		writeFieldError(w, "list", "list must be text/plain or text/csv")
		return
	}
	app, ok := s.appOf(w, r, r.URL.Query().Get("app"))
	if !ok {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxParseListLen))
	if err != nil {
		writeFieldError(w, "list", "list: body over "+strconv.Itoa(maxParseListLen)+" bytes")
		return
	}
	ids, err := yidu.ParseUserIDList(body, mt == "text/csv")
	if err != nil {
		writeFieldError(w, "list", err.Error())
		return
	}
	known, missing, err := s.Acts.SortList(r.Context(), app, ids)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"userids": known, "unknown_userids": missing})
}
