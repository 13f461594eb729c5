package dashboard

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
)

// maxScan bounds the uids one recipients request looks at when q filters:
// a search that matches nobody in 1,000,000 recipients returns an empty
// page with a cursor instead of reading the whole directory at once.
const maxScan = 20_000

type recipientQuery struct {
	state  State
	dept   int64
	hasDep bool
	q      string
	after  uint32
	hasAft bool
	limit  int
}

func parseRecipientQuery(r *http.Request, withPaging bool) (recipientQuery, error) {
	v := r.URL.Query()
	var rq recipientQuery
	var err error
	if rq.state, err = parseState(v.Get("state")); err != nil {
		return rq, err
	}
	if rq.dept, rq.hasDep, err = parseDepartment(v.Get("department")); err != nil {
		return rq, err
	}
	if rq.q, err = parseQuery(v.Get("q")); err != nil {
		return rq, err
	}
	if !withPaging {
		return rq, nil
	}
	if rq.after, rq.hasAft, err = parseCursor(v.Get("cursor")); err != nil {
		return rq, err
	}
	rq.limit, err = parseLimit(v.Get("limit"))
	return rq, err
}

// selection is the set of uids a recipients query or export walks.
func (s *Server) selection(ctx context.Context, m yidu.Message, rq recipientQuery) (set, readRec *roaring.Bitmap, tree *deptTree, err error) {
	rec, readRec, err := s.bitmaps(ctx, m)
	if err != nil {
		return nil, nil, nil, err
	}
	tree, err = s.depts.get(ctx, m.CorpID)
	if err != nil {
		return nil, nil, nil, err
	}
	switch rq.state {
	case StateRead:
		set = readRec
	case StateUnread:
		set = roaring.AndNot(rec, readRec)
	default:
		set = rec
	}
	if rq.hasDep {
		d, ok := tree.byID[rq.dept]
		if !ok || !s.deptsInScope(ctx, m, tree)(rq.dept) {
			return nil, nil, nil, badParam("unknown department %d", rq.dept)
		}
		set = roaring.And(set, d.Members)
	}
	return set, readRec, tree, nil
}

type deptRef struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

type recipientJSON struct {
	UID         uint32     `json:"uid"`
	UserID      string     `json:"userid"`
	Name        string     `json:"name"`
	Departments []deptRef  `json:"departments"`
	Read        bool       `json:"read"`
	ReadTime    *time.Time `json:"read_time"`
	Left        bool       `json:"left"`
}

type recipientsJSON struct {
	Total      uint64          `json:"total"`
	Items      []recipientJSON `json:"items"`
	NextCursor string          `json:"next_cursor"`
}

func matches(u yidu.User, q string) bool {
	return q == "" || strings.Contains(strings.ToLower(u.UserID), q) || strings.Contains(strings.ToLower(u.Name), q)
}

// deptRefs are the departments ids that inScope keeps, with their names.
func deptRefs(t *deptTree, ids []int64, inScope func(int64) bool) []deptRef {
	out := make([]deptRef, 0, len(ids))
	for _, id := range ids {
		if !inScope(id) {
			continue
		}
		ref := deptRef{ID: id}
		if d, ok := t.byID[id]; ok {
			ref.Name = d.Name
		}
		out = append(out, ref)
	}
	return out
}

func (s *Server) handleRecipients(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	rq, err := parseRecipientQuery(r, true)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := s.recipients(r.Context(), m, rq)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// A page of recipients is personal data like export.csv: it leaves
	// with its audit row, or not at all (issue 38).
	e := event(r, yidu.ActionRecipients, m.CorpID, m.App, m.MsgID)
	e.People, e.Detail = int64(len(out.Items)), recipientsDetail(rq)
	if err := s.record(r, e); err != nil {
		writeError(w, http.StatusServiceUnavailable, "recipients unavailable, try again shortly")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// recipientsDetail is the audit detail of a recipients read: what was
// asked (state, department, the search as typed, clipped).
func recipientsDetail(rq recipientQuery) string {
	d := "state=" + string(rq.state)
	if rq.hasDep {
		d += " department=" + strconv.FormatInt(rq.dept, 10)
	}
	if rq.q != "" {
		d += " q=" + strconv.Quote(yidu.Truncate(rq.q, 64))
	}
	return d
}

// recipients pages through the selection by uid: next_cursor is the last
// uid looked at, so a page filtered by q may hold fewer than limit items and
// still have a next page. An empty next_cursor means the end.
func (s *Server) recipients(ctx context.Context, m yidu.Message, rq recipientQuery) (recipientsJSON, error) {
	set, readRec, tree, err := s.selection(ctx, m, rq)
	if err != nil {
		return recipientsJSON{}, err
	}
	out := recipientsJSON{Total: set.GetCardinality(), Items: []recipientJSON{}}
	var start *uint32
	if rq.hasAft {
		if rq.after == math.MaxUint32 {
			return out, nil
		}
		next := rq.after + 1
		start = &next
	}
	inScope := s.deptsInScope(ctx, m, tree)
	var last uint32
	scanned, more := 0, false
	size := chunkSize
	if rq.q == "" {
		size = rq.limit + 1 // one directory query per page; the extra uid says "more"
	}
	err = s.forEachUserChunk(ctx, m.CorpID, set, start, size, tree, func(uids []uint32, users map[uint32]yidu.User) error {
		for _, uid := range uids {
			if len(out.Items) == rq.limit || scanned == maxScan {
				more = true
				return errStop
			}
			scanned++
			last = uid
			u := users[uid]
			if !matches(u, rq.q) {
				continue
			}
			out.Items = append(out.Items, recipientJSON{UID: uid, UserID: u.UserID, Name: u.Name,
				Departments: deptRefs(tree, u.Departments, inScope), Read: readRec.Contains(uid), Left: u.Status == yidu.StatusLeft})
		}
		return nil
	})
	if err != nil {
		return recipientsJSON{}, err
	}
	if more {
		out.NextCursor = strconv.FormatUint(uint64(last), 10)
	}
	if err := s.fillReadTimes(ctx, m, out.Items); err != nil {
		return recipientsJSON{}, err
	}
	return out, nil
}

// fillReadTimes adds read_time from MySQL; a read not yet flushed (flushd
// batches every interval) keeps read=true with read_time null.
func (s *Server) fillReadTimes(ctx context.Context, m yidu.Message, items []recipientJSON) error {
	var uids []uint32
	for _, it := range items {
		if it.Read {
			uids = append(uids, it.UID)
		}
	}
	if len(uids) == 0 {
		return nil
	}
	times, err := s.msgs.ReadTimes(ctx, m.CorpID, m.MsgID, uids)
	if err != nil {
		return fmt.Errorf("dashboard: read times: %w", err)
	}
	for i := range items {
		if t, ok := times[items[i].UID]; ok {
			t = t.UTC()
			items[i].ReadTime = &t
		}
	}
	return nil
}
