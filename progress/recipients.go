package progress

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
)

// maxScan bounds the uids one recipients request looks at when q filters:
// a search that matches nobody in 1,000,000 recipients returns an empty
// page with a cursor instead of reading the whole directory at once.
const maxScan = 20_000

// chunkSize is how many uids go to the directory at once: big enough to
// amortise the query, small enough that export memory stays flat.
const chunkSize = 1000

// ErrUnknownDepartment: a department filter names no department of the
// corp within the viewer's scope (the dashboard's 400).
var ErrUnknownDepartment = errors.New("unknown department")

// State selects recipients by read state.
type State string

// States of a recipient.
const (
	StateAll    State = "all"
	StateRead   State = "read"
	StateUnread State = "unread"
)

// Query selects recipients: by state, department subtree (HasDepartment)
// and a search q (lower case) of UserID or name; After and Limit page.
type Query struct {
	State         State
	Department    int64
	HasDepartment bool
	Q             string
	After         uint32
	HasAfter      bool
	Limit         int
}

// Selection is the set of recipients a query walks, within a View.
type Selection struct {
	p       *Progress
	m       yidu.Message
	q       Query
	set     *roaring.Bitmap
	readRec *roaring.Bitmap
	tree    *deptTree
	inScope func(int64) bool
}

// Select returns the recipients of m within v that q selects, for who
// (whose viewed departments bound a scoped department filter).
func (p *Progress) Select(ctx context.Context, m yidu.Message, v access.View, who *access.Principal, q Query) (*Selection, error) {
	rec, readRec, err := p.Bitmaps(ctx, m, v)
	if err != nil {
		return nil, err
	}
	tree, err := p.depts.get(ctx, m.CorpID)
	if err != nil {
		return nil, err
	}
	var set *roaring.Bitmap
	switch q.State {
	case StateRead:
		set = readRec
	case StateUnread:
		set = roaring.AndNot(rec, readRec)
	default:
		set = rec
	}
	scope := inScope(tree, m.CorpID, v, who)
	if q.HasDepartment {
		d, ok := tree.byID[q.Department]
		if !ok || !scope(q.Department) {
			return nil, fmt.Errorf("%w %d", ErrUnknownDepartment, q.Department)
		}
		set = roaring.And(set, d.Members)
	}
	return &Selection{p: p, m: m, q: q, set: set, readRec: readRec, tree: tree, inScope: scope}, nil
}

// Total is how many recipients the selection holds (before q's search).
func (s *Selection) Total() uint64 { return s.set.GetCardinality() }

// DeptRef is a department of a recipient.
type DeptRef struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// Recipient is one row of a recipients page.
type Recipient struct {
	UID         uint32     `json:"uid"`
	UserID      string     `json:"userid"`
	Name        string     `json:"name"`
	Departments []DeptRef  `json:"departments"`
	Read        bool       `json:"read"`
	ReadTime    *time.Time `json:"read_time"`
	Left        bool       `json:"left"`
}

// RecipientPage is one page of recipients.
type RecipientPage struct {
	Total      uint64      `json:"total"`
	Items      []Recipient `json:"items"`
	NextCursor string      `json:"next_cursor"`
}

func matches(u yidu.User, q string) bool {
	return q == "" || strings.Contains(strings.ToLower(u.UserID), q) || strings.Contains(strings.ToLower(u.Name), q)
}

// deptRefs are the departments ids that inScope keeps, with their names.
func deptRefs(t *deptTree, ids []int64, inScope func(int64) bool) []DeptRef {
	out := make([]DeptRef, 0, len(ids))
	for _, id := range ids {
		if !inScope(id) {
			continue
		}
		ref := DeptRef{ID: id}
		if d, ok := t.byID[id]; ok {
			ref.Name = d.Name
		}
		out = append(out, ref)
	}
	return out
}

// Page pages through the selection by uid: NextCursor is the last uid
// looked at, so a page filtered by q may hold fewer than Limit items and
// still have a next page. An empty NextCursor means the end.
func (s *Selection) Page(ctx context.Context) (RecipientPage, error) {
	rq, m := s.q, s.m
	out := RecipientPage{Total: s.Total(), Items: []Recipient{}}
	var start *uint32
	if rq.HasAfter {
		if rq.After == math.MaxUint32 {
			return out, nil
		}
		next := rq.After + 1
		start = &next
	}
	var last uint32
	scanned, more := 0, false
	size := chunkSize
	if rq.Q == "" {
		size = rq.Limit + 1 // one directory query per page; the extra uid says "more"
	}
	err := s.p.forEachUserChunk(ctx, m.CorpID, s.set, start, size, s.tree, func(uids []uint32, users map[uint32]yidu.User) error {
		for _, uid := range uids {
			if len(out.Items) == rq.Limit || scanned == maxScan {
				more = true
				return errStop
			}
			scanned++
			last = uid
			u := users[uid]
			if !matches(u, rq.Q) {
				continue
			}
			out.Items = append(out.Items, Recipient{UID: uid, UserID: u.UserID, Name: u.Name,
				Departments: deptRefs(s.tree, u.Departments, s.inScope), Read: s.readRec.Contains(uid), Left: u.Status == yidu.StatusLeft})
		}
		return nil
	})
	if err != nil {
		return RecipientPage{}, err
	}
	if more {
		out.NextCursor = strconv.FormatUint(uint64(last), 10)
	}
	if err := s.p.fillReadTimes(ctx, m, out.Items); err != nil {
		return RecipientPage{}, err
	}
	return out, nil
}

// fillReadTimes adds read_time from MySQL; a read not yet flushed (flushd
// batches every interval) keeps read=true with read_time null.
func (p *Progress) fillReadTimes(ctx context.Context, m yidu.Message, items []Recipient) error {
	var uids []uint32
	for _, it := range items {
		if it.Read {
			uids = append(uids, it.UID)
		}
	}
	if len(uids) == 0 {
		return nil
	}
	times, err := p.archive.ReadTimes(ctx, m.CorpID, m.MsgID, uids)
	if err != nil {
		return fmt.Errorf("progress: read times: %w", err)
	}
	for i := range items {
		if t, ok := times[items[i].UID]; ok {
			t = t.UTC()
			items[i].ReadTime = &t
		}
	}
	return nil
}

// Row is one recipient of an export: the department names within the
// viewer's scope, and for a reader the first read's time and signal
// (nil while the read is not flushed yet).
type Row struct {
	User        yidu.User
	Departments []string
	Read        bool
	First       *yidu.FirstRead
}

// Rows walks the whole selection (q's search applied) chunk by chunk:
// each chunk's users and first reads are fetched, handed to fn, then
// dropped, so memory stays flat however many recipients there are. The
// slice fn gets is reused for the next chunk.
func (s *Selection) Rows(ctx context.Context, fn func(rows []Row) error) error {
	m := s.m
	var rows []Row
	return s.p.forEachUserChunk(ctx, m.CorpID, s.set, nil, chunkSize, s.tree, func(uids []uint32, users map[uint32]yidu.User) error {
		var readUIDs []uint32
		for _, uid := range uids {
			if s.readRec.Contains(uid) {
				readUIDs = append(readUIDs, uid)
			}
		}
		var first map[uint32]yidu.FirstRead
		if len(readUIDs) > 0 && s.p.history != nil {
			var err error
			if first, err = s.p.history.FirstReads(ctx, m.CorpID, m.MsgID, readUIDs); err != nil {
				return fmt.Errorf("progress: read times: %w", err)
			}
		}
		rows = rows[:0]
		for _, uid := range uids {
			u := users[uid]
			if !matches(u, s.q.Q) {
				continue
			}
			r := Row{User: u, Read: s.readRec.Contains(uid)}
			for _, id := range u.Departments {
				if d, ok := s.tree.byID[id]; ok && s.inScope(id) {
					r.Departments = append(r.Departments, d.Name)
				}
			}
			if f, ok := first[uid]; ok && r.Read {
				r.First = &f
			}
			rows = append(rows, r)
		}
		return fn(rows)
	})
}

// Unread returns m's unread recipients within v (recipients ∩ v minus
// the readers), restoring the keys once if Redis lost them: whom a
// reminder is for.
func (p *Progress) Unread(ctx context.Context, m yidu.Message, v access.View) (*roaring.Bitmap, error) {
	rec, readRec, err := p.Bitmaps(ctx, m, v)
	if err != nil {
		return nil, err
	}
	return roaring.AndNot(rec, readRec), nil
}

// ReadNow is m's read count now (everyone, restoring once): what a recall
// freezes.
func (p *Progress) ReadNow(ctx context.Context, m yidu.Message) (int64, error) {
	c, err := p.Counts(ctx, m, access.Everyone)
	return c.Read, err
}

// UserIDs resolves uids to the UserIDs of the active members among them;
// skipped counts those without a user or a UserID (members who left are
// neither).
func (p *Progress) UserIDs(ctx context.Context, corp string, uids *roaring.Bitmap) (map[uint32]string, int, error) {
	out := map[uint32]string{}
	skipped := 0
	err := p.forEachUserChunk(ctx, corp, uids, nil, chunkSize, nil, func(uids []uint32, users map[uint32]yidu.User) error {
		skipped += len(uids) - len(users)
		for uid, u := range users {
			switch {
			case u.Status == yidu.StatusLeft:
			case u.UserID == "":
				skipped++
			default:
				out[uid] = u.UserID
			}
		}
		return nil
	})
	return out, skipped, err
}

// forEachUserChunk walks set in uid order from start (nil: the beginning),
// handing each chunk and its users to fn. fn returning errStop ends early.
func (p *Progress) forEachUserChunk(ctx context.Context, corp string, set *roaring.Bitmap, start *uint32, size int, tree *deptTree, fn func(uids []uint32, users map[uint32]yidu.User) error) error {
	it := set.Iterator()
	if start != nil {
		it.AdvanceIfNeeded(*start)
	}
	buf := make([]uint32, 0, size)
	for it.HasNext() {
		buf = buf[:0]
		for len(buf) < size && it.HasNext() {
			buf = append(buf, it.Next())
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		users, err := p.users(ctx, corp, buf, tree)
		if err != nil {
			return err
		}
		if err := fn(buf, users); err != nil {
			if errors.Is(err, errStop) {
				return nil
			}
			return err
		}
	}
	return nil
}

var errStop = errors.New("stop")

// users looks uids up in the directory. A Directory without Users gives
// UserIDs only; departments then come from the tree's direct member
// sets, one small intersection per department and chunk. tree nil:
// departments are not needed.
func (p *Progress) users(ctx context.Context, corp string, uids []uint32, tree *deptTree) (map[uint32]yidu.User, error) {
	if p.dir == nil {
		return nil, errors.New("progress: no directory")
	}
	if ud, ok := p.dir.(UserDirectory); ok {
		users, err := ud.Users(ctx, corp, uids)
		if err != nil {
			return nil, fmt.Errorf("progress: users: %w", err)
		}
		return users, nil
	}
	ids, err := p.dir.UserIDs(ctx, corp, uids)
	if err != nil {
		return nil, fmt.Errorf("progress: user ids: %w", err)
	}
	users := make(map[uint32]yidu.User, len(ids))
	for uid, id := range ids {
		users[uid] = yidu.User{UID: uid, UserID: id}
	}
	if tree == nil || len(uids) == 0 {
		return users, nil
	}
	chunk := roaring.BitmapOf(uids...)
	for i := range tree.order {
		d := &tree.order[i]
		if d.Direct == nil || !d.Direct.Intersects(chunk) {
			continue
		}
		it := roaring.And(d.Direct, chunk).Iterator()
		for it.HasNext() {
			uid := it.Next()
			if u, ok := users[uid]; ok {
				u.Departments = append(u.Departments, d.ID)
				users[uid] = u
			}
		}
	}
	return users, nil
}
