package dashboard

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
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
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/progress"
	"github.com/yidu-io/yidu/tracker"
	"github.com/yidu-io/yidu/wecom"
)

// The fixture is the dashboard over its three services built as cmd
// builds them (deps.services), over the real parts: tracker.Registry and
// idmap.Mapper on a fresh MariaDB database, bitmap.Store on the test's
// Redis prefix. Only WeCom is faked (wecomSender, tracker's Sender). The
// world below is seeded as the parts would have written it: the
// directory's rows as a sync writes them, a notice's rows as the tracker
// registers them and flushd flushes its reads, and Redis restored from
// MySQL as progress restores a notice it lost. Tests change it the same
// way (f.read, f.signal, f.sent, SQL on the directory tables) and observe
// what WeCom was sent (f.wecom) and what the tracker was asked (f.arch).

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

// wecomSender is WeCom's message/send and message/recall as the tracker
// calls them (tracker.Sender): every card is accepted, with a msgid to
// recall it by, and kept; a card whose title starts with "unreachable"
// never leaves (wecom.ErrNotSent, as an unreachable WeCom).
type wecomSender struct {
	mu      sync.Mutex
	cards   []sentCard
	recalls []string // WeCom msgids recalled
}

// sentCard is one message/send request: its UserIDs and task_id.
type sentCard struct {
	to     []string
	taskID string
}

func (s *wecomSender) SendMessage(_ context.Context, _ string, _ int64, body []byte) (wecom.SendResult, error) {
	var req struct {
		ToUser string `json:"touser"`
		Card   struct {
			TaskID    string `json:"task_id"`
			MainTitle struct {
				Title string `json:"title"`
			} `json:"main_title"`
		} `json:"template_card"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return wecom.SendResult{ErrCode: 40058, ErrMsg: "invalid json"}, nil
	}
	if strings.HasPrefix(req.Card.MainTitle.Title, "unreachable") {
		return wecom.SendResult{}, fmt.Errorf("fake wecom: %w", wecom.ErrNotSent)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cards = append(s.cards, sentCard{to: strings.Split(req.ToUser, "|"), taskID: req.Card.TaskID})
	return wecom.SendResult{MsgID: "wx-" + strconv.Itoa(len(s.cards))}, nil
}

func (s *wecomSender) RecallMessage(_ context.Context, _ string, _ int64, msgID string) (wecom.RecallResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recalls = append(s.recalls, msgID)
	return wecom.RecallResult{}, nil
}

// reminders returns the UserIDs of each reminder WeCom was sent (its
// batches together), in the order they were sent.
func (s *wecomSender) reminders() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][]string
	index := map[string]int{}
	for _, c := range s.cards {
		msg, rest, ok := strings.Cut(c.taskID, "@r")
		if !ok {
			continue
		}
		k, _, _ := strings.Cut(rest, "-")
		i, seen := index[msg+"@"+k]
		if !seen {
			i = len(out)
			index[msg+"@"+k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], c.to...)
	}
	return out
}

// recalled returns how many cards WeCom was asked to recall.
func (s *wecomSender) recalled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.recalls)
}

// archive is the real tracker as progress and campaign read it, counting
// what a test about caching asks of MySQL: restores (LoadReads) and
// readers' first reads (ReadTimes, FirstReads); curveGate, when set,
// holds every ReadsPerMinute until it receives (a slow archive).
type archive struct {
	*tracker.Registry
	mu         sync.Mutex
	loads      int
	firstReads int
	curveGate  chan struct{}
}

func (a *archive) LoadReads(ctx context.Context, corp, id string) (yidu.Message, *roaring.Bitmap, *roaring.Bitmap, map[yidu.Signal]*roaring.Bitmap, bool, error) {
	a.mu.Lock()
	a.loads++
	a.mu.Unlock()
	return a.Registry.LoadReads(ctx, corp, id)
}

func (a *archive) ReadTimes(ctx context.Context, corp, id string, uids []uint32) (map[uint32]time.Time, error) {
	a.mu.Lock()
	a.firstReads++
	a.mu.Unlock()
	return a.Registry.ReadTimes(ctx, corp, id, uids)
}

func (a *archive) FirstReads(ctx context.Context, corp, id string, uids []uint32) (map[uint32]yidu.FirstRead, error) {
	a.mu.Lock()
	a.firstReads++
	a.mu.Unlock()
	return a.Registry.FirstReads(ctx, corp, id, uids)
}

func (a *archive) ReadsPerMinute(ctx context.Context, corp, id string) ([]yidu.MinuteCount, error) {
	a.mu.Lock()
	gate := a.curveGate
	a.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return a.Registry.ReadsPerMinute(ctx, corp, id)
}

// counts returns the loads and first-read queries so far.
func (a *archive) counts() (loads, firstReads int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.loads, a.firstReads
}

// redisBitmaps is the real bitmap.Store on the test's own Redis prefix;
// drop is Redis losing a notice's keys.
type redisBitmaps struct {
	*bitmap.Store
	rdb    *redis.Client
	prefix string
}

func newRedisBitmaps(tb testing.TB) *redisBitmaps {
	tb.Helper()
	rdb, prefix := testenv.Redis(tb)
	st, err := bitmap.New(rdb, bitmap.Options{Prefix: prefix})
	testenv.Check(tb, "bitmap.New", err)
	tb.Cleanup(st.Close)
	return &redisBitmaps{Store: st, rdb: rdb, prefix: prefix}
}

func (b *redisBitmaps) drop(tb testing.TB, m yidu.Message) {
	tb.Helper()
	ctx := context.Background()
	keys, err := b.rdb.Keys(ctx, b.prefix+":m:{"+m.CorpID+"/"+m.MsgID+"}:*").Result()
	if err == nil && len(keys) > 0 {
		err = b.rdb.Del(ctx, keys...).Err()
	}
	testenv.Check(tb, "drop keys", err)
}

// idsOnly is a directory without Users (progress.UserDirectory): the
// lists carry UserIDs and departments from the member sets only.
type idsOnly struct{ m *idmap.Mapper }

func (o idsOnly) UserIDs(ctx context.Context, corp string, uids []uint32) (map[uint32]string, error) {
	return o.m.UserIDs(ctx, corp, uids)
}
func (o idsOnly) Departments(ctx context.Context, corp string) ([]yidu.Department, error) {
	return o.m.Departments(ctx, corp)
}
func (o idsOnly) DepartmentMemberSets(ctx context.Context, corp string) (map[int64]*roaring.Bitmap, error) {
	return o.m.DepartmentMemberSets(ctx, corp)
}

// pickingDir is idmap.Mapper as campaign's Picking, as cmd adapts it
// (cmd/internal/process/wiring.go, audienceDirectory).
type pickingDir struct{ *idmap.Mapper }

func (p pickingDir) DirectoryIndex(ctx context.Context, corp string) (campaign.DirectoryIndex, error) {
	idx, err := p.Index(ctx, corp)
	if err != nil {
		return nil, err
	}
	return idx, nil
}

// Test fixture: corp "acme" with a small department tree
//
//	1 Acme 公司
//	├── 2 Sales 销售部
//	│   └── 4 North 北区 (led by lisi)
//	└── 3 R&D 研发部
//
// and tag 5 管理层 (zhangsan); and corp "other" with one message nobody
// from acme may see.
const (
	acmeToken  = "acme-token-0123456789"
	otherToken = "other-token-0123456789"
	adminToken = "admin-token-0123456789"
	password   = "correct horse battery"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// acmeDepts and acmePeople are corp acme's directory; otherPeople corp
// other's.
var (
	acmeDepts = []yidu.Department{
		{ID: 1, ParentID: 0, Name: "Acme 公司"}, {ID: 2, ParentID: 1, Name: "Sales 销售部"},
		{ID: 3, ParentID: 1, Name: "R&D 研发部"}, {ID: 4, ParentID: 2, Name: "North 北区"},
	}
	acmePeople = []yidu.User{
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
	otherPeople = []yidu.User{{UID: 1, UserID: "spy", Name: "Spy"}}
)

// fixturePerson returns corp's person userID of the fixture's directory.
func fixturePerson(corp, userID string) (yidu.User, bool) {
	people := otherPeople
	if corp == "acme" {
		people = acmePeople
	}
	i := slices.IndexFunc(people, func(u yidu.User) bool { return u.UserID == userID })
	if i < 0 {
		return yidu.User{}, false
	}
	return people[i], true
}

type fixture struct {
	srv    *Server
	h      http.Handler
	clock  *clock
	db     *sql.DB
	mapper *idmap.Mapper
	arch   *archive
	bms    *redisBitmaps
	wecom  *wecomSender
	reg    *prometheus.Registry
	ledger *fakeLedger
	deps   deps
	// dirUsed is the directory the services read (mapper, or idsOnly).
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
	f := &fixture{clock: c, db: testenv.MySQL(tb), bms: newRedisBitmaps(tb), wecom: &wecomSender{},
		reg: prometheus.NewRegistry(), ledger: newFakeLedger()}
	f.seedDirectory(tb, "acme", acmeDepts, acmePeople)
	f.seedDirectory(tb, "other", nil, otherPeople)
	f.exec(tb, "INSERT INTO department_leaders (corp_id, dept_id, uid) VALUES ('acme', 4, 2)")
	f.exec(tb, "INSERT INTO tags (corp_id, tag_id, name) VALUES ('acme', 5, '管理层')")
	f.exec(tb, "INSERT INTO tag_users (corp_id, tag_id, uid) VALUES ('acme', 5, 1)")
	var err error
	f.mapper, err = idmap.New(f.db, idmap.Options{})
	testenv.Check(tb, "idmap.New", err)

	hash, err := fixtureHash()
	if err != nil {
		tb.Fatal(err)
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
		Picking:        pickingDir{f.mapper},
		Mapper:         f.mapper,
	}
	if edit != nil {
		edit(&opts)
	}
	f.deps = opts
	reg, err := tracker.New(f.db, f.mapper, f.bms.Store, tracker.Options{Sender: f.wecom, Now: c.Now, Apps: opts.Apps,
		Retry: tracker.Retry{Attempts: 1, Initial: time.Millisecond, Max: time.Millisecond},
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	testenv.Check(tb, "tracker.New", err)
	f.arch = &archive{Registry: reg}

	// hello: 1, 4 and 6 pressed the button, 9 opened the link; 1, 2 and
	// 3 opened the app, which does not count: 2 and 3 are unread. 1's and
	// 4's reads are flushed; 6's and 9's are live in Redis, still on
	// their way to MySQL.
	f.hello = f.add(tb, seeded{m: yidu.Message{CorpID: "acme", MsgID: "hello", App: "hr", Title: "Holiday notice 放假通知", SentAt: t0},
		rec: []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, read: []uint32{1, 4},
		times:   map[uint32]time.Time{1: t0.Add(time.Minute), 4: t0.Add(2 * time.Minute)},
		signals: map[yidu.Signal][]uint32{yidu.SignalButton: {1, 4}, yidu.SignalEnterAgent: {1, 2, 3}},
		pending: map[yidu.Signal][]uint32{yidu.SignalButton: {6}, yidu.SignalLink: {9}}})
	f.secret = f.add(tb, seeded{m: yidu.Message{CorpID: "other", MsgID: "secret", App: "ops", Title: "Secret", SentAt: t0}, rec: []uint32{1}})

	var dir progress.Directory = f.mapper
	if idsOnlyDir {
		dir = idsOnly{f.mapper}
	}
	f.deps, f.dirUsed = opts, dir
	srv, err := newServer(f.arch, f.bms, dir, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(srv.Close)
	f.srv, f.h = srv, srv.Routes()
	return f
}

// exec runs one statement on the fixture's database.
func (f *fixture) exec(tb testing.TB, q string, args ...any) {
	tb.Helper()
	_, err := f.db.Exec(q, args...)
	testenv.Check(tb, q, err)
}

// count runs a COUNT query on the fixture's database.
func (f *fixture) count(tb testing.TB, q string, args ...any) int {
	tb.Helper()
	return testenv.Column[int](tb, f.db, q, args...)[0]
}

// seedDirectory writes corp's departments and people as a directory
// sync does (idmap's tables; uids as given).
func (f *fixture) seedDirectory(tb testing.TB, corp string, depts []yidu.Department, people []yidu.User) {
	tb.Helper()
	bulkInsert(tb, f.db, "INSERT INTO departments (corp_id, dept_id, parent_id, name) VALUES ", len(depts), func(i int) (string, []any) {
		return "(?,?,?,?)", []any{corp, depts[i].ID, depts[i].ParentID, depts[i].Name}
	})
	next := uint32(1)
	var members [][2]int64
	bulkInsert(tb, f.db, "INSERT INTO users (corp_id, uid, userid, name, status, departments, bad_userid) VALUES ", len(people), func(i int) (string, []any) {
		u := people[i]
		ds, err := idmap.FormatDepartments(u.Departments)
		testenv.Check(tb, "FormatDepartments", err)
		for _, d := range u.Departments {
			members = append(members, [2]int64{d, int64(u.UID)})
		}
		next = max(next, u.UID+1)
		return "(?,?,?,?,?,?,?)", []any{corp, u.UID, u.UserID, u.Name, cmp.Or(u.Status, yidu.StatusActive), ds, !yidu.UserID(u.UserID).Valid()}
	})
	bulkInsert(tb, f.db, "INSERT INTO user_departments (corp_id, dept_id, uid) VALUES ", len(members), func(i int) (string, []any) {
		return "(?,?,?)", []any{corp, members[i][0], members[i][1]}
	})
	f.exec(tb, "INSERT INTO uid_seq (corp_id, next_uid) VALUES (?, ?)", corp, next)
	f.exec(tb, "INSERT INTO directory_versions (corp_id, version) VALUES (?, 1)", corp)
}

// setUserID renames corp's uid to userID in the directory, as a
// change_contact does (a UserID WeCom would refuse is flagged).
func (f *fixture) setUserID(tb testing.TB, corp string, uid uint32, userID string) {
	tb.Helper()
	f.exec(tb, "UPDATE users SET userid = ?, bad_userid = ? WHERE corp_id = ? AND uid = ?", userID, !yidu.UserID(userID).Valid(), corp, uid)
	f.exec(tb, "UPDATE directory_versions SET version = version + 1 WHERE corp_id = ?", corp)
}

// seeded is one seeded notice: its recipients, its flushed readers
// (read at times, else at the send), the signals each member gave (read
// or not), the reads marked in Redis whose deltas flushd has not written
// yet (pending, by signal), and whether Redis has it (cold: its keys
// expired).
type seeded struct {
	m         yidu.Message
	rec, read []uint32
	times     map[uint32]time.Time
	signals   map[yidu.Signal][]uint32
	pending   map[yidu.Signal][]uint32
	cold      bool
}

// add writes n as the tracker registers a notice (messages and one
// message_read_record row per recipient) and flushd flushes its reads
// and signals, then restores Redis from MySQL (unless n.cold). It
// returns the message as the tracker loads it.
func (f *fixture) add(tb testing.TB, n seeded) yidu.Message {
	tb.Helper()
	m := n.m
	m.Recipients = int64(len(n.rec))
	if m.AgentID == 0 {
		for _, a := range f.deps.Apps {
			if a.Name == m.App && a.CorpID == m.CorpID {
				m.AgentID = a.AgentID
			}
		}
	}
	f.exec(tb, "INSERT INTO messages (corp_id, msgid, app, agent_id, title, body, url, sent_at, recipient_count, audience_hash, state)"+
		" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)", m.CorpID, m.MsgID, m.App, m.AgentID, m.Title, m.Body, m.URL, m.SentAt, m.Recipients,
		fmt.Sprintf("%064x", len(m.MsgID)))
	if k := len(n.rec); k > 1000 && n.rec[k-1]-n.rec[0] == uint32(k-1) && len(n.read) == 0 && len(n.signals) == 0 { // one statement
		f.exec(tb, "INSERT INTO message_read_record (corp_id, msgid, uid) SELECT ?, ?, ? + n FROM "+seqSQL+" WHERE n < ?",
			m.CorpID, m.MsgID, n.rec[0], k)
	} else {
		bulkInsert(tb, f.db, "INSERT INTO message_read_record (corp_id, msgid, uid, is_read, read_time, source, button_at, link_at, enter_at) VALUES ",
			len(n.rec), func(i int) (string, []any) {
				u := n.rec[i]
				at := cmpTime(n.times[u], m.SentAt)
				args := []any{m.CorpID, m.MsgID, u, false, nil, 0}
				if slices.Contains(n.read, u) {
					src := yidu.SignalButton
					if slices.Contains(n.signals[yidu.SignalLink], u) {
						src = yidu.SignalLink
					}
					args[3], args[4], args[5] = true, at, int(src)
				}
				for _, sig := range []yidu.Signal{yidu.SignalButton, yidu.SignalLink, yidu.SignalEnterAgent} {
					var v any
					if slices.Contains(n.signals[sig], u) {
						v = at
					}
					args = append(args, v)
				}
				return "(?,?,?,?,?,?,?,?,?)", args
			})
	}
	if !n.cold {
		f.restore(tb, m)
		read, sigs := roaring.New(), map[yidu.Signal]*roaring.Bitmap{}
		for sig, uids := range n.pending {
			sigs[sig] = roaring.BitmapOf(uids...)
			read.AddMany(uids)
		}
		testenv.Check(tb, "mark pending reads", f.bms.RestoreReads(context.Background(), m, roaring.BitmapOf(n.rec...), read, sigs))
	}
	return m
}

func cmpTime(t, def time.Time) time.Time {
	if t.IsZero() {
		return def
	}
	return t
}

// signalColumn is the message_read_record column of sig's first time.
func signalColumn(sig yidu.Signal) string {
	switch sig {
	case yidu.SignalButton:
		return "button_at"
	case yidu.SignalLink:
		return "link_at"
	case yidu.SignalEnterAgent:
		return "enter_at"
	}
	panic(fmt.Sprintf("no column for signal %v", sig))
}

// restore puts m's rows into Redis, as progress restores a notice Redis
// lost (bits are ORed in).
func (f *fixture) restore(tb testing.TB, m yidu.Message) {
	tb.Helper()
	ctx := context.Background()
	got, rec, read, sigs, found, err := f.arch.Registry.LoadReads(ctx, m.CorpID, m.MsgID)
	testenv.Check(tb, "LoadReads", err)
	if !found {
		tb.Fatalf("restore: %s/%s not found", m.CorpID, m.MsgID)
	}
	testenv.Check(tb, "RestoreReads", f.bms.RestoreReads(ctx, got, rec, read, sigs))
}

// read records that uids read m by sig at at, as flushd flushes a read
// (the row, then the bits in Redis).
func (f *fixture) read(tb testing.TB, m yidu.Message, sig yidu.Signal, at time.Time, uids ...uint32) {
	tb.Helper()
	at = at.UTC().Truncate(time.Second)
	for _, u := range uids {
		f.exec(tb, "UPDATE message_read_record SET is_read = 1, read_time = COALESCE(read_time, ?), source = IF(source = 0, ?, source),"+
			" "+signalColumn(sig)+" = COALESCE("+signalColumn(sig)+", ?) WHERE corp_id = ? AND msgid = ? AND uid = ?",
			at, int(sig), at, m.CorpID, m.MsgID, u)
	}
	f.restore(tb, m)
}

// signal records that uids gave m's signal sig, which does not count as a
// read.
func (f *fixture) signal(tb testing.TB, m yidu.Message, sig yidu.Signal, at time.Time, uids ...uint32) {
	tb.Helper()
	for _, u := range uids {
		f.exec(tb, "UPDATE message_read_record SET "+signalColumn(sig)+" = COALESCE("+signalColumn(sig)+", ?) WHERE corp_id = ? AND msgid = ? AND uid = ?",
			at.UTC().Truncate(time.Second), m.CorpID, m.MsgID, u)
	}
	f.restore(tb, m)
}

// sends records m's send batches as the tracker records WeCom's answers
// (message_sends; a sent batch with the msgid to recall it by).
func (f *fixture) sends(tb testing.TB, m yidu.Message, outs ...yidu.BatchOutcome) {
	tb.Helper()
	for _, o := range outs {
		kind := "send"
		if o.Reminder {
			kind = "remind"
		}
		var wx any
		if o.Status == yidu.SendSent {
			wx = fmt.Sprintf("wx-%s-%s-%d", m.MsgID, kind, o.Batch)
		}
		f.exec(tb, "INSERT INTO message_sends (corp_id, msgid, kind, batch, status, users, wecom_msgid, sent_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
			m.CorpID, m.MsgID, kind, o.Batch, string(o.Status), o.Users, wx, o.At)
	}
}

// sent gives a fixture message one sent batch at at.
func (f *fixture) sent(tb testing.TB, m yidu.Message, at time.Time) {
	tb.Helper()
	f.sends(tb, m, yidu.BatchOutcome{Batch: 0, Status: yidu.SendSent, Users: int(m.Recipients), At: at})
}

// seqSQL is the numbers 0…999,999 as rows of column n, so that a test
// writes many rows in one INSERT … SELECT.
var seqSQL = func() string {
	d := "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4" +
		" UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
	return "(SELECT d0.d + 10*d1.d + 100*d2.d + 1000*d3.d + 10000*d4.d + 100000*d5.d AS n FROM " +
		d + " d0, " + d + " d1, " + d + " d2, " + d + " d3, " + d + " d4, " + d + " d5) seq"
}()

// bulkInsert runs head with n rows of row's placeholders and arguments,
// 2000 rows a statement.
func bulkInsert(tb testing.TB, db *sql.DB, head string, n int, row func(i int) (string, []any)) {
	tb.Helper()
	const batch = 2000
	for lo := 0; lo < n; lo += batch {
		var sb strings.Builder
		var args []any
		sb.WriteString(head)
		for i := lo; i < min(n, lo+batch); i++ {
			ph, a := row(i)
			if i > lo {
				sb.WriteByte(',')
			}
			sb.WriteString(ph)
			args = append(args, a...)
		}
		if _, err := db.Exec(sb.String(), args...); err != nil {
			tb.Fatalf("%s: %v", head, err)
		}
	}
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

// fixtureHash is alice's password hash, one for every fixture: replicas
// of one deployment share their configuration (a session names the
// credential it was opened with).
var fixtureHash = sync.OnceValues(func() ([]byte, error) {
	return bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
})

// browse sends r as a browser would: with the session cookie c (nil:
// none) and the headers hdr.
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
