package tracker

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/flushd"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/wecom"
)

// The fake WeCom serves every test of the binary (util.SetURIModifier is
// process-wide); tests use their own corp ids and msgids so they never see
// each other's calls.
var (
	fake   = fakewecom.New()
	faults sync.Map // msgid → fault
)

// fault may answer a message/send call itself (returning true) instead of
// the fake; body is the request body.
type fault func(w http.ResponseWriter, r *http.Request, body []byte) bool

// injectFault makes f see msgID's message/send calls until t ends.
func injectFault(t testing.TB, msgID string, f fault) {
	faults.Store(msgID, f)
	t.Cleanup(func() { faults.Delete(msgID) })
}

func TestMain(m *testing.M) {
	os.Exit(testenv.RunWithWeCom(m, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/cgi-bin/message/send" {
			body, _ := io.ReadAll(r.Body)
			var req struct {
				TemplateCard struct {
					TaskID string `json:"task_id"`
				} `json:"template_card"`
			}
			_ = json.Unmarshal(body, &req)
			msgID, _ := yidu.ParseTaskID(req.TemplateCard.TaskID)
			if f, ok := faults.Load(string(msgID)); ok && f.(fault)(w, r, body) {
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		fake.ServeHTTP(w, r)
	})))
}

// env is one test's tracker on real MariaDB and Redis with the real idmap
// and bitmap packages.
type env struct {
	db    *sql.DB
	ids   *idmap.Mapper
	store *bitmap.Store
	reg   *Registry
	// rdb and prefix are the store's Redis and key prefix (to lose keys).
	rdb    redis.UniversalClient
	prefix string
	prom   *prometheus.Registry
	app    yidu.App
	// secret is the app's secret, which only the WeCom client holds.
	secret string

	mu    sync.Mutex
	slept []time.Duration // what the tracker waited, without waiting
}

// sleeps returns the waits so far.
func (e *env) sleeps() []time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.slept)
}

type envOption func(*Options, *env)

func newEnv(tb testing.TB, opts ...envOption) *env {
	tb.Helper()
	db := testenv.MySQL(tb)
	rdb, prefix := testenv.Redis(tb)
	e := &env{
		db:   db,
		prom: prometheus.NewRegistry(),
		app: yidu.App{
			Name: "hr", CorpID: testenv.RandomName("corp"), AgentID: 1000002,
			ReadButtonKey: "read_ok",
		},
		secret: "secret",
	}
	ids, err := idmap.New(db, idmap.Options{Registerer: prometheus.NewRegistry()})
	testenv.Check(tb, "idmap.New", err)
	e.ids = ids
	store, err := bitmap.New(rdb, bitmap.Options{Prefix: prefix, Registerer: prometheus.NewRegistry()})
	testenv.Check(tb, "bitmap.New", err)
	e.store, e.rdb, e.prefix = store, rdb, prefix
	tb.Cleanup(e.store.Close)
	fake.SetCorp(fakewecom.Corp{CorpID: e.app.CorpID, Apps: []fakewecom.App{{AgentID: e.app.AgentID, Secret: e.secret}}})
	o := Options{
		Registerer: e.prom,
		Sender:     wecom.NewSender([]wecom.App{{CorpID: e.app.CorpID, AgentID: e.app.AgentID, Secret: e.secret}}, wecom.SenderOptions{Rate: 1000, Burst: 100}),
		Apps:       []yidu.App{e.app},
		Retry:      Retry{Attempts: 3, Initial: time.Millisecond, Max: 5 * time.Millisecond},
		// Waits are recorded, not waited: WeCom's minute block would hold
		// a test for minutes.
		Sleep: func(ctx context.Context, d time.Duration) error {
			e.mu.Lock()
			e.slept = append(e.slept, d)
			e.mu.Unlock()
			return ctx.Err()
		},
	}
	for _, opt := range opts {
		opt(&o, e)
	}
	reg, err := New(db, e.ids, e.store, o)
	testenv.Check(tb, "New", err)
	e.reg = reg
	return e
}

// registration is a registration of au, whose UserIDs the directory
// knows (as after a sync): they are made members first.
func (e *env) registration(msgID string, au yidu.Audience) yidu.Registration {
	if len(au.UserIDs) > 0 {
		if _, err := e.ids.Assign(context.Background(), e.app.CorpID, au.UserIDs); err != nil {
			panic(err) // the test's own database
		}
	}
	return e.rawRegistration(msgID, au)
}

// sendRegistration is a registration to n UserIDs (userIDs) that sends.
func (e *env) sendRegistration(msgID string, n int) yidu.Registration {
	r := e.registration(msgID, yidu.Audience{UserIDs: userIDs(n)})
	r.Send = true
	return r
}

// rawRegistration is registration without touching the directory.
func (e *env) rawRegistration(msgID string, au yidu.Audience) yidu.Registration {
	return yidu.Registration{MsgID: msgID, App: e.app, Title: "Quarterly <safety> & \"you\"", Audience: au}
}

// register registers msgID to au (registration) and fails tb unless it
// succeeds.
func (e *env) register(tb testing.TB, msgID string, au yidu.Audience) yidu.Message {
	tb.Helper()
	m, _, err := e.reg.Register(context.Background(), e.registration(msgID, au))
	testenv.Check(tb, "register "+msgID, err)
	return m
}

// rows returns the uids of a message's rows, in order.
func (e *env) rows(tb testing.TB, msgID string) []uint32 {
	tb.Helper()
	return testenv.Column[uint32](tb, e.db, "SELECT uid FROM message_read_record WHERE corp_id = ? AND msgid = ? ORDER BY uid",
		e.app.CorpID, msgID)
}

func (e *env) count(tb testing.TB, query string, args ...any) int {
	tb.Helper()
	var n int
	testenv.Check(tb, query, e.db.QueryRow(query, args...).Scan(&n))
	return n
}

// users creates active members with departments through idmap's
// change_contact path and returns their uids.
func (e *env) users(tb testing.TB, depts map[string][]int64) map[string]uint32 {
	tb.Helper()
	ctx := context.Background()
	ids := make([]string, 0, len(depts))
	for id := range depts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		testenv.Check(tb, "create user", e.ids.ContactChanged(ctx, e.app.CorpID, idmap.ChangeCreateUser, id, "", depts[id]))
	}
	uids, err := e.ids.Assign(ctx, e.app.CorpID, ids)
	testenv.Check(tb, "assign", err)
	return uids
}

// departments writes a department tree (id → parent).
func (e *env) departments(tb testing.TB, parents map[int64]int64) {
	tb.Helper()
	for id, p := range parents {
		_, err := e.db.Exec("INSERT INTO departments (corp_id, dept_id, parent_id, name) VALUES (?, ?, ?, ?)",
			e.app.CorpID, id, p, "d")
		testenv.Check(tb, "insert department", err)
	}
}

// failingStore is a bitmap store whose writes fail, as when Redis is down.
type failingStore struct{ Store }

func (failingStore) PutMessage(context.Context, yidu.Message, *roaring.Bitmap) error {
	return errRedisDown
}

func (failingStore) RestoreReads(context.Context, yidu.Message, *roaring.Bitmap, *roaring.Bitmap, map[yidu.Signal]*roaring.Bitmap) error {
	return errRedisDown
}

var errRedisDown = errors.New("redis: connection refused")

// The real providers satisfy the interfaces tracker declares.
var (
	_ Directory     = (*idmap.Mapper)(nil)
	_ Store         = (*bitmap.Store)(nil)
	_ OrphanApplier = (*flushd.Writer)(nil)
	_ Sender        = (*wecom.Sender)(nil)
)

// orphanFunc adapts flushd.ApplyOrphans (the function) to OrphanApplier.
type orphanFunc func(ctx context.Context, corpID, msgID string) (int, error)

func (f orphanFunc) ApplyOrphans(ctx context.Context, corpID, msgID string) (int, error) {
	return f(ctx, corpID, msgID)
}

// mustNew is New that fails tb on error.
func mustNew(tb testing.TB, db *sql.DB, ids Directory, store Store, opts Options) *Registry {
	tb.Helper()
	r, err := New(db, ids, store, opts)
	testenv.Check(tb, "New", err)
	return r
}
