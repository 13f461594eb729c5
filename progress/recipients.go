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
	// The reading page's four states (yidu.ReadState, issue 49): who
	// never opened it, opened it without reading to the end, read to
	// the end without acknowledging, acknowledged.
	StateUnopened     State = State(yidu.ReadStateUnopened)
	StateOpened       State = State(yidu.ReadStateOpened)
	StateReadToEnd    State = State(yidu.ReadStateReadToEnd)
	StateAcknowledged State = State(yidu.ReadStateAcknowledged)
)

// PageState reports whether st is one of the reading page's four states.
func (st State) PageState() bool {
	switch st {
	case StateUnopened, StateOpened, StateReadToEnd, StateAcknowledged:
		return true
	}
	return false
}

// SignalBitmaps is the per-signal bitmaps the four page states are
// made of (bitmap.Store); a Bitmaps without them answers those states
// with ErrUnavailable.
type SignalBitmaps interface {
	SignalBitmap(ctx context.Context, corpID, msgID string, sig yidu.Signal) (*roaring.Bitmap, bool, error)
}

// pageSets are a notice's recipients (within a view) by page state.
type pageSets struct {
	unopened, opened, readToEnd, acknowledged *roaring.Bitmap
}

func (ps *pageSets) of(st State) *roaring.Bitmap {
	switch st {
	case StateUnopened:
		return ps.unopened
	case StateOpened:
		return ps.opened
	case StateReadToEnd:
		return ps.readToEnd
	}
	return ps.acknowledged
}

// stateOf is uid's page state.
func (ps *pageSets) stateOf(uid uint32) yidu.ReadState {
	switch {
	case ps.acknowledged.Contains(uid):
		return yidu.ReadStateAcknowledged
	case ps.readToEnd.Contains(uid):
		return yidu.ReadStateReadToEnd
	case ps.opened.Contains(uid):
		return yidu.ReadStateOpened
	}
	return yidu.ReadStateUnopened
}

// pageSetsWithin splits m's recipients within v (restoring the keys once
// if Redis lost them) by the page's signals (pageSetsOf).
func (p *Progress) pageSetsWithin(ctx context.Context, m yidu.Message, v access.View) (*pageSets, error) {
	rec, _, err := p.Bitmaps(ctx, m, v)
	if err != nil {
		return nil, err
	}
	return p.pageSetsOf(ctx, m, rec)
}

// pageSetsOf splits rec by the page's signals: an acknowledgement
// (of the current version: bitmap.Store.ResetAcknowledged empties it for
// a version that asks again) over reading to the end over opening.
func (p *Progress) pageSetsOf(ctx context.Context, m yidu.Message, rec *roaring.Bitmap) (*pageSets, error) {
	sb, ok := p.bms.(SignalBitmaps)
	if !ok {
		return nil, fmt.Errorf("progress: page states: %w", ErrUnavailable)
	}
	get := func(sig yidu.Signal) (*roaring.Bitmap, error) {
		b, _, err := sb.SignalBitmap(ctx, m.CorpID, m.MsgID, sig)
		if err != nil {
			return nil, fmt.Errorf("progress: %s bitmap: %w", sig, err)
		}
		if b == nil {
			return roaring.New(), nil
		}
		return roaring.And(b, rec), nil
	}
	link, err := get(yidu.SignalLink)
	if err != nil {
		return nil, err
	}
	end, err := get(yidu.SignalReadToEnd)
	if err != nil {
		return nil, err
	}
	ack, err := get(yidu.SignalAcknowledged)
	if err != nil {
		return nil, err
	}
	ps := &pageSets{acknowledged: ack, readToEnd: roaring.AndNot(end, ack)}
	ps.opened = roaring.AndNot(roaring.AndNot(link, end), ack)
	ps.unopened = roaring.AndNot(rec, roaring.Or(roaring.Or(link, end), ack))
	return ps, nil
}

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
	// page splits the recipients by the reading page's states: a notice
	// read under read_rule acknowledged, or a page-state query; nil else.
	page *pageSets
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
	var ps *pageSets
	if q.State.PageState() || m.ReadRule.Acknowledging() {
		if ps, err = p.pageSetsOf(ctx, m, rec); err != nil {
			return nil, err
		}
	}
	switch {
	case q.State == StateRead:
		set = readRec
	case q.State == StateUnread:
		set = roaring.AndNot(rec, readRec)
	case q.State.PageState():
		set = ps.of(q.State)
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
	return &Selection{p: p, m: m, q: q, set: set, readRec: readRec, tree: tree, inScope: scope, page: ps}, nil
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
	// State is the reading page's state (unopened, opened, read_to_end,
	// acknowledged) of a notice read under read_rule acknowledged.
	State yidu.ReadState `json:"state,omitempty"`
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
			rc := Recipient{UID: uid, UserID: u.UserID, Name: u.Name,
				Departments: deptRefs(s.tree, u.Departments, s.inScope), Read: s.readRec.Contains(uid), Left: u.Status == yidu.StatusLeft}
			if s.page != nil {
				rc.State = s.page.stateOf(uid)
			}
			out.Items = append(out.Items, rc)
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
	// State is the reading page's state of a notice read under
	// read_rule acknowledged; "" otherwise.
	State yidu.ReadState
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
			if s.page != nil {
				r.State = s.page.stateOf(uid)
			}
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

// InState returns m's recipients within v in the reading page's state st
// (restoring the keys once if Redis lost them): whom a reminder by state
// is for (campaign.StateReaders).
func (p *Progress) InState(ctx context.Context, m yidu.Message, v access.View, st yidu.ReadState) (*roaring.Bitmap, error) {
	if !State(st).PageState() {
		return nil, fmt.Errorf("progress: unknown state %q", st)
	}
	ps, err := p.pageSetsWithin(ctx, m, v)
	if err != nil {
		return nil, err
	}
	return ps.of(State(st)), nil
}

// StateCounts is how many of m's recipients within v are in each of the
// reading page's states (restoring the keys once if Redis lost them):
// the message page's remind choice names them.
func (p *Progress) StateCounts(ctx context.Context, m yidu.Message, v access.View) (map[yidu.ReadState]uint64, error) {
	ps, err := p.pageSetsWithin(ctx, m, v)
	if err != nil {
		return nil, err
	}
	out := make(map[yidu.ReadState]uint64, 4)
	for _, st := range yidu.ReadStates() {
		out[st] = ps.of(State(st)).GetCardinality()
	}
	return out, nil
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
