package dashboard

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"golang.org/x/crypto/bcrypt"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/progress"
)

// In-memory stand-ins for tracker and idmap, following the seams in
// types.go, and the real bitmap.Store on the test's Redis. The
// integration test runs the real ones of all three.

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func key(corp, msg string) string { return corp + "/" + msg }

// fakeBitmaps is the real bitmap.Store on the test's own Redis prefix,
// not a copy of it; put, markRead, markSignal and drop write a test's
// state through the store's own RestoreReads (bits are ORed, as a
// restore does) and DEL.
type fakeBitmaps struct {
	*bitmap.Store
	rdb    *redis.Client
	prefix string
	mu     sync.Mutex
	rec    map[string]*roaring.Bitmap
}

func newFakeBitmaps(tb testing.TB) *fakeBitmaps {
	tb.Helper()
	rdb, prefix := testenv.Redis(tb)
	st, err := bitmap.New(rdb, bitmap.Options{Prefix: prefix})
	testenv.Check(tb, "bitmap.New", err)
	tb.Cleanup(st.Close)
	return &fakeBitmaps{Store: st, rdb: rdb, prefix: prefix, rec: map[string]*roaring.Bitmap{}}
}

func (f *fakeBitmaps) write(m yidu.Message, read *roaring.Bitmap, sigs map[yidu.Signal]*roaring.Bitmap) {
	f.mu.Lock()
	rec := f.rec[key(m.CorpID, m.MsgID)]
	f.mu.Unlock()
	if err := f.RestoreReads(context.Background(), m, rec, read, sigs); err != nil {
		panic(err)
	}
}

// put writes m's recipients and readers (the keys as registered).
func (f *fakeBitmaps) put(m yidu.Message, rec, read *roaring.Bitmap) {
	f.mu.Lock()
	f.rec[key(m.CorpID, m.MsgID)] = rec.Clone()
	f.mu.Unlock()
	f.write(m, read, nil)
}

// markSignal records that uids gave signal sig.
func (f *fakeBitmaps) markSignal(m yidu.Message, sig yidu.Signal, uids ...uint32) {
	f.write(m, nil, map[yidu.Signal]*roaring.Bitmap{sig: roaring.BitmapOf(uids...)})
}

func (f *fakeBitmaps) markRead(m yidu.Message, uids ...uint32) {
	f.write(m, roaring.BitmapOf(uids...), nil)
}

// drop is Redis losing m's keys.
func (f *fakeBitmaps) drop(m yidu.Message) {
	ctx := context.Background()
	keys, err := f.rdb.Keys(ctx, f.prefix+":m:{"+m.CorpID+"/"+m.MsgID+"}:*").Result()
	if err == nil && len(keys) > 0 {
		err = f.rdb.Del(ctx, keys...).Err()
	}
	if err != nil {
		panic(err)
	}
}

type stored struct {
	m         yidu.Message
	rec, read *roaring.Bitmap
	signals   map[yidu.Signal]*roaring.Bitmap // nil: none
	times     map[uint32]time.Time
	sources   map[uint32]yidu.Signal // the signal of each read in times (missing: button)
	curve     []yidu.MinuteCount
	audience  string
	sends     []yidu.BatchOutcome
}

type fakeMessages struct {
	mu        sync.Mutex
	msgs      map[string]*stored
	order     []string // newest first
	loads     int
	reminders []yidu.Message
	remindTo  [][]string
	recalls   []string
	now       func() time.Time
	// curveGate, when set, holds every ReadsPerMinute until it receives
	// (a slow archive).
	curveGate chan struct{}
	// readTimes counts ReadTimes calls (a scoped curve's MySQL reads).
	readTimes int
}

func newFakeMessages(now func() time.Time) *fakeMessages {
	return &fakeMessages{msgs: map[string]*stored{}, now: now}
}

func (f *fakeMessages) add(s *stored) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := key(s.m.CorpID, s.m.MsgID)
	f.msgs[k] = s
	f.order = append([]string{k}, f.order...)
}

func allowed(corps []string, c string) bool { return corps == nil || slices.Contains(corps, c) }

func (f *fakeMessages) SearchMessages(_ context.Context, corps []string, title, app, cursor string, limit int) ([]yidu.Message, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []yidu.Message
	started := cursor == ""
	for _, k := range f.order {
		if !started {
			started = k == cursor
			continue
		}
		s := f.msgs[k]
		if !allowed(corps, s.m.CorpID) || !strings.Contains(strings.ToLower(s.m.Title), strings.ToLower(title)) || app != "" && s.m.App != app {
			continue
		}
		if len(out) == limit {
			return out, key(out[len(out)-1].CorpID, out[len(out)-1].MsgID), nil
		}
		out = append(out, s.m)
	}
	if !started {
		// The tracker refuses a cursor that names no position.
		return nil, "", yidu.Invalidf("bad cursor")
	}
	return out, "", nil
}

// SearchVisible filters first, then pages, as the tracker does.
func (f *fakeMessages) SearchVisible(ctx context.Context, corps []string, title, app, cursor string, limit int, keep func(yidu.Message) (bool, error)) ([]yidu.Message, string, error) {
	all, _, err := f.SearchMessages(ctx, corps, title, app, cursor, 1<<30)
	if err != nil {
		return nil, "", err
	}
	var out []yidu.Message
	for i, m := range all {
		if keep != nil {
			ok, err := keep(m)
			if err != nil {
				return nil, "", err
			}
			if !ok {
				continue
			}
		}
		out = append(out, m)
		if len(out) == limit && i < len(all)-1 {
			return out, key(m.CorpID, m.MsgID), nil
		}
	}
	return out, "", nil
}

// Reaches reports whether uids meet the recipients (MySQL in the tracker).
func (f *fakeMessages) Reaches(_ context.Context, corp, id string, uids *roaring.Bitmap) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.msgs[key(corp, id)]
	return ok && uids != nil && s.rec.Intersects(uids), nil
}

func (f *fakeMessages) GetMessage(_ context.Context, corps []string, id string) (yidu.Message, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range f.order {
		if s := f.msgs[k]; s.m.MsgID == id && allowed(corps, s.m.CorpID) {
			return s.m, true, nil
		}
	}
	return yidu.Message{}, false, nil
}

func (f *fakeMessages) LoadReads(_ context.Context, corp, id string) (yidu.Message, *roaring.Bitmap, *roaring.Bitmap, map[yidu.Signal]*roaring.Bitmap, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loads++
	s, ok := f.msgs[key(corp, id)]
	if !ok {
		return yidu.Message{}, nil, nil, nil, false, nil
	}
	signals := map[yidu.Signal]*roaring.Bitmap{}
	for sig, b := range s.signals {
		signals[sig] = b.Clone()
	}
	return s.m, s.rec.Clone(), s.read.Clone(), signals, true, nil
}

func (f *fakeMessages) FirstReads(ctx context.Context, corp, id string, uids []uint32) (map[uint32]yidu.FirstRead, error) {
	times, err := f.ReadTimes(ctx, corp, id, uids)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.msgs[key(corp, id)]
	out := make(map[uint32]yidu.FirstRead, len(times))
	for u, t := range times {
		sig, ok := s.sources[u]
		if !ok {
			sig = yidu.SignalButton
		}
		out[u] = yidu.FirstRead{At: t, Signal: sig}
	}
	return out, nil
}

func (f *fakeMessages) ReadTimes(_ context.Context, corp, id string, uids []uint32) (map[uint32]time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readTimes++
	out := map[uint32]time.Time{}
	if s, ok := f.msgs[key(corp, id)]; ok {
		for _, u := range uids {
			if t, ok := s.times[u]; ok {
				out[u] = t
			}
		}
	}
	return out, nil
}

// cloneOf returns a copy of one list of message corp/id (nil: unknown).
func cloneOf[T any](f *fakeMessages, corp, id string, list func(*stored) []T) []T {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.msgs[key(corp, id)]; ok {
		return slices.Clone(list(s))
	}
	return nil
}

func (f *fakeMessages) ReadsPerMinute(ctx context.Context, corp, id string) ([]yidu.MinuteCount, error) {
	f.mu.Lock()
	gate := f.curveGate
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return cloneOf(f, corp, id, func(s *stored) []yidu.MinuteCount { return s.curve }), nil
}

func (f *fakeMessages) RegisterAndSend(ctx context.Context, reg yidu.Registration) (yidu.Registered, error) {
	m, created, rep, err := f.registerAndSend(ctx, reg)
	res := yidu.Registered{Message: m, Created: created, Send: rep}
	for _, u := range reg.Audience.UserIDs {
		if strings.HasPrefix(u, "nobody") {
			res.UnknownUserIDs = append(res.UnknownUserIDs, u)
		}
	}
	return res, err
}

// registerAndSend is the tracker as the dashboard sees it; a UserID
// starting with "nobody" is unknown to the directory.
func (f *fakeMessages) registerAndSend(_ context.Context, reg yidu.Registration) (yidu.Message, bool, yidu.SendReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var rep yidu.SendReport
	// The tracker validates with the domain's one rule; so does the fake.
	if err := reg.Validate(f.now()); err != nil {
		return yidu.Message{}, false, rep, err
	}
	aud := strings.Join(reg.Audience.UserIDs, ",") + "|" + reg.Title + "|" + reg.Body + "|" + reg.URL
	k := key(reg.App.CorpID, reg.MsgID)
	if s, ok := f.msgs[k]; ok {
		if s.audience != aud {
			return yidu.Message{}, false, rep, yidu.ErrConflict
		}
		if reg.Send {
			rep.Outcomes = earlier(s.sends)
		}
		return s.m, false, rep, nil
	}
	known := slices.DeleteFunc(slices.Clone(reg.Audience.UserIDs), func(u string) bool { return strings.HasPrefix(u, "nobody") })
	if len(known) == 0 && len(reg.Audience.Departments) == 0 && !reg.Audience.All {
		return yidu.Message{}, false, rep, yidu.Invalidf("audience has no members")
	}
	m := yidu.Message{CorpID: reg.App.CorpID, MsgID: reg.MsgID, App: reg.App.Name, Title: reg.Title, Body: reg.Body, URL: reg.URL,
		SentAt: reg.SentAt, Recipients: int64(len(known))}
	st := &stored{m: m, rec: roaring.New(), read: roaring.New(), audience: aud}
	if reg.Send {
		// WeCom unreachable is "refused" as the fake tells it: a title
		// starting with "unreachable".
		o := yidu.BatchOutcome{Batch: 0, Status: yidu.SendSent, Users: len(reg.Audience.UserIDs), At: f.now()}
		if strings.HasPrefix(reg.Title, "unreachable") {
			o.Status = yidu.SendUnsent
		}
		st.sends = []yidu.BatchOutcome{o}
		rep.Outcomes = slices.Clone(st.sends)
	}
	f.msgs[k] = st
	f.order = append([]string{k}, f.order...)
	return m, true, rep, nil
}

// earlier marks outcomes as an earlier send's.
func earlier(outs []yidu.BatchOutcome) []yidu.BatchOutcome {
	out := slices.Clone(outs)
	for i := range out {
		out[i].Earlier = true
	}
	return out
}

func (f *fakeMessages) SendOutcomes(_ context.Context, corp, id string) ([]yidu.BatchOutcome, error) {
	return cloneOf(f, corp, id, func(s *stored) []yidu.BatchOutcome { return s.sends }), nil
}

// Recall recalls a message with sends; within 24 h of its first batch.
func (f *fakeMessages) Recall(_ context.Context, m yidu.Message, read int64) (yidu.RecallReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var rep yidu.RecallReport
	s, ok := f.msgs[key(m.CorpID, m.MsgID)]
	switch {
	case !ok || len(s.sends) == 0:
		return rep, fmt.Errorf("%w: nothing sent", yidu.ErrNotRecallable)
	case s.m.Recalled():
		rep.Already, rep.RecalledAt = len(s.sends), s.m.RecalledAt
		return rep, nil
	case f.now().Sub(s.sends[0].At) >= 24*time.Hour:
		return rep, fmt.Errorf("%w: sent more than 24 hours ago", yidu.ErrNotRecallable)
	}
	f.recalls = append(f.recalls, m.MsgID)
	for i := range s.sends {
		s.sends[i].Recalled = true
	}
	s.m.RecalledAt, s.m.ReadAtRecall = f.now(), read
	rep.Recalled, rep.RecalledAt = len(s.sends), s.m.RecalledAt
	return rep, nil
}

func (f *fakeMessages) Remind(_ context.Context, m yidu.Message, userIDs []string) (yidu.RemindReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reminders = append(f.reminders, m)
	// As the tracker: a UserID WeCom would refuse is skipped and counted.
	var ok []string
	rep := yidu.RemindReport{}
	for _, u := range userIDs {
		if yidu.UserID(u).Valid() {
			ok = append(ok, u)
		} else {
			rep.BadUserIDs++
		}
	}
	f.remindTo = append(f.remindTo, ok)
	rep.Reminded, rep.Batches = len(ok), (len(ok)+999)/1000
	return rep, nil
}

type fakeDirectory struct {
	mu      sync.Mutex
	users   map[string]map[uint32]yidu.User
	depts   map[string][]yidu.Department
	queries int
	// audience answers DirectoryIndex and Expand (directory_api_test.go);
	// nil: they fail.
	audience interface {
		Index(ctx context.Context, corpID string) (*idmap.Index, error)
		Expand(ctx context.Context, corpID string, a yidu.Audience) (yidu.Expansion, error)
	}
}

func (f *fakeDirectory) Users(_ context.Context, corp string, uids []uint32) (map[uint32]yidu.User, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries++
	out := make(map[uint32]yidu.User, len(uids))
	for _, u := range uids {
		if x, ok := f.users[corp][u]; ok {
			out[u] = x
		}
	}
	return out, nil
}

func (f *fakeDirectory) UserIDs(ctx context.Context, corp string, uids []uint32) (map[uint32]string, error) {
	users, _ := f.Users(ctx, corp, uids)
	out := map[uint32]string{}
	for uid, u := range users {
		out[uid] = u.UserID
	}
	return out, nil
}

// idsOnly hides Users, as idmap.Mapper does today.
type idsOnly struct{ d *fakeDirectory }

func (o idsOnly) UserIDs(ctx context.Context, corp string, uids []uint32) (map[uint32]string, error) {
	return o.d.UserIDs(ctx, corp, uids)
}
func (o idsOnly) Departments(ctx context.Context, corp string) ([]yidu.Department, error) {
	return o.d.Departments(ctx, corp)
}
func (o idsOnly) DepartmentMemberSets(ctx context.Context, corp string) (map[int64]*roaring.Bitmap, error) {
	return o.d.DepartmentMemberSets(ctx, corp)
}

func (f *fakeDirectory) Departments(_ context.Context, corp string) ([]yidu.Department, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.depts[corp]), nil
}

func (f *fakeDirectory) DepartmentMemberSets(_ context.Context, corp string) (map[int64]*roaring.Bitmap, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[int64]*roaring.Bitmap{}
	for uid, u := range f.users[corp] {
		for _, d := range u.Departments {
			if out[d] == nil {
				out[d] = roaring.New()
			}
			out[d].Add(uid)
		}
	}
	return out, nil
}

// Test fixture: corp "acme" with a small department tree
//
//	1 Acme 公司
//	├── 2 Sales 销售部
//	│   └── 4 North 北区
//	└── 3 R&D 研发部
//
// and corp "other" with one message nobody from acme may see.
const (
	acmeToken  = "acme-token-0123456789"
	otherToken = "other-token-0123456789"
	adminToken = "admin-token-0123456789"
	password   = "correct horse battery"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

type fixture struct {
	srv    *Server
	h      http.Handler
	clock  *clock
	msgs   *fakeMessages
	bms    *fakeBitmaps
	dir    *fakeDirectory
	reg    *prometheus.Registry
	ledger *fakeLedger
	deps   deps
	// dirUsed is the directory the services read (dir, or idsOnly).
	dirUsed progress.Directory
	hello   yidu.Message // acme, 10 recipients, 4 read
	secret  yidu.Message // other corp
}

func newFixture(tb testing.TB) *fixture { return newFixtureWith(tb, false) }

// newFixtureWith builds the fixture; idsOnlyDir hides the directory's Users.
func newFixtureWith(tb testing.TB, idsOnlyDir bool) *fixture {
	tb.Helper()
	return newFixtureOpts(tb, idsOnlyDir, nil)
}

// newFixtureOpts is newFixtureWith with edit (may be nil) applied to the
// server's Options.
func newFixtureOpts(tb testing.TB, idsOnlyDir bool, edit func(*deps)) *fixture {
	tb.Helper()
	c := &clock{t: t0.Add(30 * time.Minute)}
	f := &fixture{clock: c, msgs: newFakeMessages(c.Now), bms: newFakeBitmaps(tb), reg: prometheus.NewRegistry(), ledger: newFakeLedger()}
	f.dir = &fakeDirectory{
		users: map[string]map[uint32]yidu.User{"acme": {}, "other": {}},
		depts: map[string][]yidu.Department{"acme": {
			{ID: 1, ParentID: 0, Name: "Acme 公司"}, {ID: 2, ParentID: 1, Name: "Sales 销售部"},
			{ID: 3, ParentID: 1, Name: "R&D 研发部"}, {ID: 4, ParentID: 2, Name: "North 北区"},
		}},
	}
	people := []yidu.User{
		{UID: 1, UserID: "zhangsan", Name: "张三", Departments: []int64{2}},
		{UID: 2, UserID: "lisi", Name: "李四", Departments: []int64{4}},
		{UID: 3, UserID: "wangwu", Name: "王五", Departments: []int64{3}},
		{UID: 4, UserID: "Alice", Name: "Alice Smith", Departments: []int64{3, 4}},
		{UID: 5, UserID: "bob", Name: "<script>alert(1)</script>", Departments: []int64{3}},
		{UID: 6, UserID: "evil", Name: "=HYPERLINK(\"http://x\",\"y\")", Departments: []int64{2}},
		{UID: 7, UserID: "carol", Name: "Carol", Departments: []int64{1}},
		{UID: 8, UserID: "dave", Name: "Dave", Departments: []int64{4}, Status: yidu.StatusLeft},
		{UID: 9, UserID: "erin", Name: "Erin", Departments: []int64{2, 3}},
		{UID: 10, UserID: "frank", Name: "Frank", Departments: []int64{3}},
		{UID: 11, UserID: "notrecipient", Name: "Not A Recipient", Departments: []int64{3}},
	}
	for _, u := range people {
		f.dir.users["acme"][u.UID] = u
	}
	f.dir.users["other"][1] = yidu.User{UID: 1, UserID: "spy", Name: "Spy"}

	f.hello = yidu.Message{CorpID: "acme", MsgID: "hello", App: "hr", Title: "Holiday notice 放假通知", SentAt: t0, Recipients: 10}
	rec := roaring.BitmapOf(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	read := roaring.BitmapOf(1, 4, 6, 9)
	// 1, 4 and 6 pressed the button, 9 opened the link; 1, 2 and 3 opened
	// the app, which does not count: 2 and 3 are unread.
	signals := map[yidu.Signal]*roaring.Bitmap{yidu.SignalButton: roaring.BitmapOf(1, 4, 6),
		yidu.SignalLink: roaring.BitmapOf(9), yidu.SignalEnterAgent: roaring.BitmapOf(1, 2, 3)}
	f.msgs.add(&stored{m: f.hello, rec: rec.Clone(), read: read.Clone(), signals: signals,
		times:   map[uint32]time.Time{1: t0.Add(time.Minute), 4: t0.Add(2 * time.Minute)},
		sources: map[uint32]yidu.Signal{4: yidu.SignalButton},
		curve:   []yidu.MinuteCount{{Minute: t0.Add(time.Minute), Reads: 1}, {Minute: t0.Add(2 * time.Minute), Reads: 1}},
	})
	f.bms.put(f.hello, rec, read)
	for sig, b := range signals {
		f.bms.markSignal(f.hello, sig, b.ToArray()...)
	}
	f.secret = yidu.Message{CorpID: "other", MsgID: "secret", App: "ops", Title: "Secret", SentAt: t0, Recipients: 1}
	f.msgs.add(&stored{m: f.secret, rec: roaring.BitmapOf(1), read: roaring.New()})
	f.bms.put(f.secret, roaring.BitmapOf(1), nil)

	hash, err := fixtureHash()
	if err != nil {
		tb.Fatal(err)
	}
	var dir progress.Directory = f.dir
	if idsOnlyDir {
		dir = idsOnly{f.dir}
	}
	opts := deps{Options: Options{
		Registerer: f.reg, Now: c.Now,
		Apps: []yidu.App{{Name: "hr", CorpID: "acme", AgentID: 1000002}, {Name: "ops", CorpID: "other", AgentID: 1000003}}},
		Tokens: []access.Token{
			{Name: "acme", Token: acmeToken, Corps: []string{"acme"}},
			{Name: "other", Token: otherToken, Corps: []string{"other"}},
			{Name: "admin", Token: adminToken, Corps: []string{"*"}},
		},
		Users: []access.User{
			{Name: "alice", PasswordHash: string(hash), Corps: []string{"acme"}},
		},
		SessionTTL:     time.Hour,
		RemindInterval: time.Hour,
		Ledger:         f.ledger,
	}
	if edit != nil {
		edit(&opts)
	}
	f.deps, f.dirUsed = opts, dir
	srv, err := newServer(f.msgs, f.bms, dir, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(srv.Close)
	f.srv, f.h = srv, srv.Routes()
	return f
}

// do sends a request with a bearer token ("" for none).
func (f *fixture) do(tb testing.TB, method, target, token string, body io.Reader) *httptest.ResponseRecorder {
	tb.Helper()
	r := httptest.NewRequest(method, target, body)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	return w
}

// ok sends an API request as acme and fails tb unless it answers 200.
func (f *fixture) ok(tb testing.TB, method, target string) *httptest.ResponseRecorder {
	tb.Helper()
	w := f.do(tb, method, target, acmeToken, nil)
	if w.Code != http.StatusOK {
		tb.Fatalf("%s %s = %d: %s", method, target, w.Code, w.Body)
	}
	return w
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`)

// browse sends r as a browser would: with the session cookie c (nil:
// none) and the headers hdr.
// fixtureHash is alice's password hash, one for every fixture: replicas
// of one deployment share their configuration (a session names the
// credential it was opened with).
var fixtureHash = sync.OnceValues(func() ([]byte, error) {
	return bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
})

func (f *fixture) browse(r *http.Request, c *http.Cookie, hdr map[string]string) *httptest.ResponseRecorder {
	if c != nil {
		r.AddCookie(c)
		if safeMethod(r.Method) {
			r.Header.Set("Sec-Fetch-Site", "same-origin") // a browser on the page; hdr may say otherwise
		}
	}
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	return w
}

// page GETs target with the session cookie c.
func (f *fixture) page(c *http.Cookie, target string) *httptest.ResponseRecorder {
	return f.browse(httptest.NewRequest("GET", target, nil), c, nil)
}

// postLogin posts the sign-in form as user with pass and the headers hdr.
func (f *fixture) postLogin(user, pass string, hdr map[string]string) *httptest.ResponseRecorder {
	form := url.Values{"username": {user}, "password": {pass}}
	r := httptest.NewRequest("POST", "/login", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return f.browse(r, nil, hdr)
}

// login signs alice in through the form and returns her session cookie and
// the CSRF token from the page.
func (f *fixture) login(tb testing.TB) (*http.Cookie, string) {
	tb.Helper()
	w := f.postLogin("alice", password, nil)
	if w.Code != http.StatusSeeOther {
		tb.Fatalf("login: status %d: %s", w.Code, w.Body)
	}
	var c *http.Cookie
	for _, x := range w.Result().Cookies() {
		if x.Name == sessionCookie {
			c = x
		}
	}
	if c == nil {
		tb.Fatal("login: no session cookie")
	}
	w = f.page(c, "/")
	m := csrfMeta.FindStringSubmatch(w.Body.String())
	if m == nil || m[1] == "" {
		tb.Fatalf("no csrf token on the page: %s", w.Body)
	}
	return c, m[1]
}

// client returns an HTTP client against a real listener, for SSE.
func (f *fixture) client(tb testing.TB) (*httptest.Server, *http.Client) {
	tb.Helper()
	ts := httptest.NewServer(f.h)
	tb.Cleanup(ts.Close)
	jar, _ := cookiejar.New(nil)
	return ts, &http.Client{Jar: jar}
}

func sortedUIDs(items []recipientJSON) []uint32 {
	var out []uint32
	for _, it := range items {
		out = append(out, it.UID)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
