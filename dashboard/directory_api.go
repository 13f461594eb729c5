package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
)

// AudienceDirectory is what the compose page's endpoints need of the
// directory (idmap.Mapper, through cmd's adapter): the in-memory index of
// a corp's directory at its current version, and the audience expansion a
// registration snapshots (one rule: the preview's count is the
// registration's).
type AudienceDirectory interface {
	DirectoryIndex(ctx context.Context, corpID string) (DirectoryIndex, error)
	Expand(ctx context.Context, corpID string, a yidu.Audience) (yidu.Expansion, error)
}

// DirectoryIndex is one corp's directory at one version (idmap.Index):
// read-only, what the compose page lists, searches and counts.
type DirectoryIndex interface {
	Departments() []yidu.DepartmentNode
	Org() *yidu.Org
	SubtreeMembers(ids ...int64) *roaring.Bitmap
	Tags() []yidu.TagCount
	Search(q string, limit int) []yidu.Person
}

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

// audienceDir returns the directory's AudienceDirectory, or answers 501.
func (s *Server) audienceDir(w http.ResponseWriter) (AudienceDirectory, bool) {
	ad, ok := s.dir.(AudienceDirectory)
	if !ok {
		writeError(w, http.StatusNotImplemented, "this directory cannot answer audience queries")
	}
	return ad, ok
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

// directoryIndex returns the Index of the query's app's corp.
func (s *Server) directoryIndex(w http.ResponseWriter, r *http.Request) (DirectoryIndex, bool) {
	ad, ok := s.audienceDir(w)
	if !ok {
		return nil, false
	}
	app, ok := s.appOf(w, r, r.URL.Query().Get("app"))
	if !ok {
		return nil, false
	}
	idx, err := ad.DirectoryIndex(r.Context(), app.CorpID)
	if err != nil {
		s.fail(w, r, err)
		return nil, false
	}
	return idx, true
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
	idx, ok := s.directoryIndex(w, r)
	if !ok {
		return
	}
	lim, err := s.pickerLimit(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	nodes := pickable(idx.Departments(), func(d yidu.DepartmentNode) bool { return lim.Department(d.ID) })
	out := make([]departmentJSON, 0, len(nodes))
	for _, d := range nodes {
		out = append(out, departmentJSON{ID: d.ID, ParentID: d.ParentID, Name: d.Name, Members: d.Members, Leaders: append([]string{}, d.Leaders...)})
	}
	// everyone: whether 全员 may be picked (issue 41).
	writeJSON(w, http.StatusOK, map[string]any{"departments": out, "everyone": lim.All()})
}

type tagJSON struct {
	ID      int64  `json:"id"`
	Name    string `json:"name"`
	Members int    `json:"members"`
}

// handleDirectoryTags: GET /api/v1/directory/tags?app=.
func (s *Server) handleDirectoryTags(w http.ResponseWriter, r *http.Request) {
	idx, ok := s.directoryIndex(w, r)
	if !ok {
		return
	}
	lim, err := s.pickerLimit(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := []tagJSON{}
	for _, t := range pickable(idx.Tags(), func(t yidu.TagCount) bool { return lim.Tag(t.ID) }) {
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
	idx, ok := s.directoryIndex(w, r)
	if !ok {
		return
	}
	lim, err := s.pickerLimit(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	found := idx.Search(query, limit)
	if !lim.All() {
		inside, err := lim.Members(r.Context())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		found = pickable(idx.Search(query, maxSearchLimit*10), func(p yidu.Person) bool { return inside.Contains(p.UID) })
		found = found[:min(len(found), limit)]
	}
	out := []personJSON{}
	for _, p := range found {
		out = append(out, personJSON{UserID: p.UserID, Name: p.Name, Departments: append([]int64{}, p.Departments...)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"people": out})
}

type previewBody struct {
	App      string `json:"app"`
	Audience struct {
		UserIDs     []string `json:"userids"`
		Departments []int64  `json:"departments"`
		Tags        []int64  `json:"tags"`
		All         bool     `json:"all"`
	} `json:"audience"`
}

type previewDeptJSON struct {
	ID         int64  `json:"id"`
	Name       string `json:"name"`
	Recipients int    `json:"recipients"`
}

// handleAudiencePreview: POST /api/v1/audience/preview. It validates the
// audience with the registration's rule (yidu.Audience.Validate), expands it with the registration's expansion, and
// writes nothing.
func (s *Server) handleAudiencePreview(w http.ResponseWriter, r *http.Request) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "Content-Type must be application/json")
		return
	}
	ad, ok := s.audienceDir(w)
	if !ok {
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
	au := yidu.Audience{UserIDs: b.Audience.UserIDs, Departments: b.Audience.Departments, Tags: b.Audience.Tags, All: b.Audience.All}
	if err := au.Validate(); err != nil {
		writeFieldError(w, "audience", err.Error())
		return
	}
	if err := s.checkAudience(r, principalFrom(r.Context()), app, au); err != nil {
		s.fail(w, r, err)
		return
	}
	idx, err := ad.DirectoryIndex(r.Context(), app.CorpID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	x, err := ad.Expand(r.Context(), app.CorpID, au)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// The top levels of what was picked: the picked departments under no
	// other picked one; without departments, the tree's first level.
	var tops []int64
	picked := map[int64]bool{}
	for _, d := range au.Departments {
		picked[d] = true
	}
	org := idx.Org()
	for _, d := range au.Departments {
		if _, known := org.Department(d); known && !org.Above(d, func(p int64) bool { return picked[p] }) {
			tops = append(tops, d)
		}
	}
	if len(tops) == 0 {
		for _, root := range org.Children(0) {
			tops = append(tops, org.Children(root)...)
			if len(org.Children(root)) == 0 {
				tops = append(tops, root)
			}
		}
	}
	depts := []previewDeptJSON{}
	for _, d := range tops {
		n := int(idx.SubtreeMembers(d).AndCardinality(x.Recipients))
		if n == 0 {
			continue
		}
		dep, _ := org.Department(d)
		depts = append(depts, previewDeptJSON{ID: d, Name: dep.Name, Recipients: n})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"recipients": x.Recipients.GetCardinality(), "unknown_userids": append([]string{}, x.Unknown...),
		"left": len(x.Left), "departments": depts,
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
	ad, ok := s.audienceDir(w)
	if !ok {
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
	x, err := ad.Expand(r.Context(), app.CorpID, yidu.Audience{UserIDs: ids})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	unknown := map[string]bool{}
	for _, u := range x.Unknown {
		unknown[u] = true
	}
	for _, u := range x.Left {
		unknown[u] = true
	}
	known := []string{}
	for _, u := range ids {
		if !unknown[u] {
			known = append(known, u)
		}
	}
	missing := append(append([]string{}, x.Unknown...), x.Left...)
	slices.Sort(missing)
	writeJSON(w, http.StatusOK, map[string]any{"userids": known, "unknown_userids": missing})
}

// ParseUserIDList parses a pasted list or CSV of UserIDs.
//
// Deprecated: moved to yidu.ParseUserIDList; kept while other branches merge.
func ParseUserIDList(data []byte, isCSV bool) ([]string, error) {
	return yidu.ParseUserIDList(data, isCSV)
}
