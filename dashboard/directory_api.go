package dashboard

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/campaign"
)

// Bounds of the directory endpoints' input.
const (
	maxSearchQuery  = 64      // characters of q
	maxSearchLimit  = 100     // people per search
	maxPreviewBody  = 8 << 20 // as POST /messages: yidu.MaxUserIDs quoted UserIDs
	maxParseListLen = 8 << 20
)

// fieldError is a validation error naming its field (CONTRACT.md:
// {"error", "field"}).
func writeFieldError(w http.ResponseWriter, field, msg string) {
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": msg, "field": field})
}

// appOf resolves the app named by a request for the principal: an app of
// a granted corp (apps the principal may use), else a 400 on "app".
func (s *Server) appOf(w http.ResponseWriter, r *http.Request, name string) (yidu.App, bool) {
	app, ok := s.apps[name]
	if !ok || !principalFrom(r.Context()).MaySend(app.CorpID, app.Name) {
		writeFieldError(w, "app", "app: unknown app "+strconv.Quote(yidu.Truncate(name, 64)))
		return yidu.App{}, false
	}
	return app, true
}

// picker is what the caller may pick from the query's app's directory
// (campaign.Picker).
func (s *Server) picker(w http.ResponseWriter, r *http.Request) (campaign.Picker, bool) {
	app, ok := s.appOf(w, r, r.URL.Query().Get("app"))
	if !ok {
		return campaign.Picker{}, false
	}
	pk, err := s.acts.Picker(r.Context(), principalFrom(r.Context()), app)
	if err != nil {
		s.fail(w, r, err)
		return campaign.Picker{}, false
	}
	return pk, true
}

type departmentJSON struct {
	ID       int64    `json:"id"`
	ParentID int64    `json:"parent_id"`
	Name     string   `json:"name"`
	Members  int      `json:"members"`
	Leaders  []string `json:"leaders"`
}

// handleDirectoryDepartments: GET /api/v1/directory/departments?app=.
func (s *Server) handleDirectoryDepartments(w http.ResponseWriter, r *http.Request) {
	pk, ok := s.picker(w, r)
	if !ok {
		return
	}
	nodes := pk.Departments()
	out := make([]departmentJSON, 0, len(nodes))
	for _, d := range nodes {
		out = append(out, departmentJSON{ID: d.ID, ParentID: d.ParentID, Name: d.Name, Members: d.Members, Leaders: append([]string{}, d.Leaders...)})
	}
	// everyone: whether 全员 may be picked (issue 41).
	writeJSON(w, http.StatusOK, map[string]any{"departments": out, "everyone": pk.Everyone()})
}

type tagJSON struct {
	ID      int64  `json:"id"`
	Name    string `json:"name"`
	Members int    `json:"members"`
}

// handleDirectoryTags: GET /api/v1/directory/tags?app=.
func (s *Server) handleDirectoryTags(w http.ResponseWriter, r *http.Request) {
	pk, ok := s.picker(w, r)
	if !ok {
		return
	}
	out := []tagJSON{}
	for _, t := range pk.Tags() {
		out = append(out, tagJSON{ID: t.ID, Name: t.Name, Members: t.Members})
	}
	writeJSON(w, http.StatusOK, map[string]any{"tags": out})
}

type personJSON struct {
	UserID      string  `json:"userid"`
	Name        string  `json:"name"`
	Departments []int64 `json:"departments"`
}

// handleDirectoryPeople: GET /api/v1/directory/people?app=&q=&limit=.
func (s *Server) handleDirectoryPeople(w http.ResponseWriter, r *http.Request) {
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
		s.fail(w, r, err)
		return
	}
	out := []personJSON{}
	for _, p := range found {
		out = append(out, personJSON{UserID: p.UserID, Name: p.Name, Departments: append([]int64{}, p.Departments...)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"people": out})
}

type previewBody struct {
	App      string       `json:"app"`
	Audience audienceJSON `json:"audience"`
}

// handleAudiencePreview: POST /api/v1/audience/preview. It validates the
// audience with the registration's rule (yidu.Audience.Validate), expands it with the registration's expansion, and
// writes nothing.
func (s *Server) handleAudiencePreview(w http.ResponseWriter, r *http.Request) {
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
	au := b.Audience.audience()
	if err := au.Validate(); err != nil {
		writeFieldError(w, "audience", err.Error())
		return
	}
	pv, err := s.acts.Preview(r.Context(), principalFrom(r.Context()), app, au)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"recipients": pv.Recipients, "unknown_userids": pv.Unknown, "left": pv.Left, "departments": pv.Departments,
	})
}

// handleParseList: POST /api/v1/audience/parse-list?app=, a text/plain
// or text/csv body of UserIDs (one per line; a CSV's first column).
func (s *Server) handleParseList(w http.ResponseWriter, r *http.Request) {
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
	known, missing, err := s.acts.SortList(r.Context(), app, ids)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"userids": known, "unknown_userids": missing})
}
