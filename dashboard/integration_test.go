package dashboard

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/progress"
	"github.com/yidu-io/yidu/tracker"
)

// The real providers satisfy what the tests build the services from.
var (
	_ messages               = (*tracker.Registry)(nil)
	_ progress.Bitmaps       = (*bitmap.Store)(nil)
	_ progress.Directory     = (*idmap.Mapper)(nil)
	_ progress.UserDirectory = (*idmap.Mapper)(nil)
)

// synthCorp is a synthetic directory: root 1, ten departments under it
// (2..11), ten under each of those (12..111). Every user sits in one leaf;
// every 7th is also in a top-level department (sometimes its own ancestor,
// which must not count twice).
type synthCorp struct {
	users   int
	parent  map[int64]int64
	deptsOf map[uint32][]int64
}

func newSynthCorp(users int) *synthCorp {
	s := &synthCorp{users: users, parent: map[int64]int64{1: 0}, deptsOf: map[uint32][]int64{}}
	for top := int64(2); top <= 11; top++ {
		s.parent[top] = 1
		for j := range int64(10) {
			s.parent[12+(top-2)*10+j] = top
		}
	}
	for uid := uint32(1); uid <= uint32(users); uid++ {
		ds := []int64{12 + int64(uid%100)}
		if uid%7 == 0 {
			ds = append(ds, 2+int64(uid%10))
		}
		s.deptsOf[uid] = ds
	}
	return s
}

func (s *synthCorp) load(tb testing.TB, db *sql.DB, corp string) {
	tb.Helper()
	ctx := context.Background()
	insert := func(head string, n int, row func(i int) (string, []any)) { bulkInsert(tb, db, head, n, row) }
	ids := make([]int64, 0, len(s.parent))
	for id := range s.parent {
		ids = append(ids, id)
	}
	insert("INSERT INTO departments (corp_id, dept_id, parent_id, name) VALUES ", len(ids), func(i int) (string, []any) {
		return "(?,?,?,?)", []any{corp, ids[i], s.parent[ids[i]], fmt.Sprintf("部门 Dept %d", ids[i])}
	})
	insert("INSERT INTO users (corp_id, uid, userid, name, status, departments) VALUES ", s.users, func(i int) (string, []any) {
		uid := uint32(i + 1)
		ds, _ := idmap.FormatDepartments(s.deptsOf[uid])
		return "(?,?,?,?,1,?)", []any{corp, uid, fmt.Sprintf("u%06d", uid), fmt.Sprintf("员工%d", uid), ds}
	})
	var pairs [][2]int64
	for uid := uint32(1); uid <= uint32(s.users); uid++ {
		for _, d := range s.deptsOf[uid] {
			pairs = append(pairs, [2]int64{d, int64(uid)})
		}
	}
	insert("INSERT INTO user_departments (corp_id, dept_id, uid) VALUES ", len(pairs), func(i int) (string, []any) {
		return "(?,?,?)", []any{corp, pairs[i][0], pairs[i][1]}
	})
	if _, err := db.ExecContext(ctx, "INSERT INTO uid_seq (corp_id, next_uid) VALUES (?, ?)", corp, s.users+1); err != nil {
		tb.Fatal(err)
	}
}

// TestIntegration runs the API on real MariaDB and Redis with the real
// tracker, bitmap and idmap: a message to 100,000 people in a department
// tree, a third of whom have read it.
func TestIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 recipients")
	}
	ctx := context.Background()
	db := testenv.MySQL(t)
	rdb, prefix := testenv.Redis(t)
	corp := testenv.RandomName("corp")
	app := yidu.App{Name: "hr", CorpID: corp, AgentID: 1000002}
	const n = 100_000
	synth := newSynthCorp(n)
	start := time.Now()
	synth.load(t, db, corp)
	t.Logf("directory loaded in %v", time.Since(start))

	logger := slog.New(slog.DiscardHandler)
	mapper, err := idmap.New(db, idmap.Options{Logger: logger})
	testenv.Check(t, "idmap.New", err)
	bms, err := bitmap.New(rdb, bitmap.Options{Prefix: prefix, Logger: logger})
	testenv.Check(t, "bitmap.New", err)
	t.Cleanup(bms.Close)
	reg, err := tracker.New(db, mapper, bms, tracker.Options{Logger: logger, Apps: []yidu.App{app}})
	testenv.Check(t, "tracker.New", err)
	const token = "integration-token-0123456789"
	ledger, err := store.NewReminderLog(db, "", 0, nil, logger)
	testenv.Check(t, "store.NewReminderLog", err)
	srv, err := newServer(reg, bms, mapper, deps{Options: Options{Apps: []yidu.App{app}, Logger: logger}, Ledger: ledger,
		Tokens: []access.Token{
			{Name: "it", Token: token, Corps: []string{corp}},
			{Name: "other", Token: "other-corp-token-0123456789", Corps: []string{"someone-else"}},
		},
	})
	testenv.Check(t, "New", err)
	t.Cleanup(srv.Close)
	h := srv.Routes()
	do := func(method, target, tok, body string) *httptest.ResponseRecorder {
		t.Helper()
		var r *http.Request
		if body != "" {
			r = httptest.NewRequest(method, target, strings.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
		} else {
			r = httptest.NewRequest(method, target, nil)
		}
		if tok != "" {
			r.Header.Set("Authorization", "Bearer "+tok)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}

	sentAt := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	body := fmt.Sprintf(`{"msgid":"big","app":"hr","title":"全员通知 All hands","sent_at":%q,"audience":{"departments":[1]}}`, sentAt.Format(time.RFC3339))
	start = time.Now()
	w := do("POST", "/api/v1/messages", token, body)
	if w.Code != http.StatusCreated {
		t.Fatalf("register = %d: %s", w.Code, w.Body)
	}
	t.Logf("registered in %v", time.Since(start))
	m := decode[messageJSON](t, w)
	if m.Recipients != n {
		t.Fatalf("recipients = %d; want %d", m.Recipients, n)
	}

	// A third have read: flushed to MySQL (as flushd would) and set in Redis.
	read := roaring.New()
	for uid := uint32(3); uid <= n; uid += 3 {
		read.Add(uid)
	}
	// They pressed the button; a fifth of everyone opened the app, which
	// does not count.
	_, err = db.ExecContext(ctx, `UPDATE message_read_record SET is_read = 1, source = 1,
		read_time = DATE_ADD(?, INTERVAL uid % 60 MINUTE), button_at = read_time WHERE corp_id = ? AND msgid = 'big' AND uid % 3 = 0`, sentAt, corp)
	testenv.Check(t, "flush reads", err)
	_, err = db.ExecContext(ctx, `UPDATE message_read_record SET enter_at = ? WHERE corp_id = ? AND msgid = 'big' AND uid % 5 = 0`, sentAt, corp)
	testenv.Check(t, "flush app entries", err)
	_, _, loaded, signals, _, err := reg.LoadReads(ctx, corp, "big")
	testenv.Check(t, "LoadReads", err)
	if !loaded.Equals(read) {
		t.Fatalf("LoadReads read %d; want %d", loaded.GetCardinality(), read.GetCardinality())
	}
	rec := roaring.New()
	rec.AddRange(1, n+1)
	msg := yidu.Message{CorpID: corp, MsgID: "big", App: "hr", AgentID: app.AgentID, Title: m.Title, SentAt: m.SentAt, Recipients: n}
	testenv.Check(t, "mark reads", bms.RestoreReads(ctx, msg, rec, read, signals))
	wantRead := int64(read.GetCardinality())
	wantBy := yidu.SignalCounts{Button: wantRead, EnterAgent: n / 5}

	check := func(t *testing.T) {
		w := do("GET", "/api/v1/messages/big", token, "")
		got := decode[messageJSON](t, w)
		if w.Code != 200 || got.Recipients != n || *got.Read != wantRead || *got.Unread != n-wantRead || *got.BySignal != wantBy {
			t.Errorf("GET big = %d %+v; want %d/%d, by_signal %+v", w.Code, got, wantRead, n, wantBy)
		}
	}
	t.Run("counts equal a recount", check)

	t.Run("departments add up", func(t *testing.T) {
		w := do("GET", "/api/v1/messages/big/departments", token, "")
		var out struct{ Departments []deptJSON }
		testenv.Check(t, "decode", jsonUnmarshal(w.Body.Bytes(), &out))
		if len(out.Departments) != len(synth.parent) {
			t.Fatalf("%d departments; want %d", len(out.Departments), len(synth.parent))
		}
		// Brute force: walk up from each person's departments, counting
		// every department on the way once per person.
		wantRec, wantRd := map[int64]uint64{}, map[int64]uint64{}
		for uid, ds := range synth.deptsOf {
			seen := map[int64]bool{}
			for _, x := range ds {
				for ; x != 0 && !seen[x]; x = synth.parent[x] {
					seen[x] = true
					wantRec[x]++
					if uid%3 == 0 {
						wantRd[x]++
					}
				}
			}
		}
		for _, d := range out.Departments {
			wantRec, wantRd := wantRec[d.ID], wantRd[d.ID]
			if d.Recipients != wantRec || d.Read != wantRd {
				t.Errorf("department %d = %d/%d; want %d/%d", d.ID, d.Read, d.Recipients, wantRd, wantRec)
			}
		}
	})

	t.Run("recipients with read times", func(t *testing.T) {
		w := do("GET", "/api/v1/messages/big/recipients?state=read&department=12&limit=5", token, "")
		got := decode[recipientsJSON](t, w)
		if len(got.Items) != 5 || got.NextCursor == "" {
			t.Fatalf("page = %+v", got)
		}
		for _, it := range got.Items {
			want := sentAt.Add(time.Duration(it.UID%60) * time.Minute)
			if !it.Read || it.ReadTime == nil || !it.ReadTime.Equal(want) || it.UserID != fmt.Sprintf("u%06d", it.UID) {
				t.Errorf("item %+v; want read at %v", it, want)
			}
		}
	})

	t.Run("export", func(t *testing.T) {
		w := do("GET", "/api/v1/messages/big/export.csv?state=unread", token, "")
		rows, err := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(w.Body.Bytes(), []byte(utf8BOM)))).ReadAll()
		testenv.Check(t, "csv", err)
		if int64(len(rows)-1) != n-wantRead {
			t.Errorf("export rows = %d; want %d", len(rows)-1, n-wantRead)
		}
		if r := rows[1]; r[0] != "u000001" || r[3] != "unread" || r[2] != "部门 Dept 13" {
			t.Errorf("first row = %q", r)
		}
	})

	t.Run("progress curve", func(t *testing.T) {
		p := decode[progressJSON](t, do("GET", "/api/v1/messages/big/progress", token, ""))
		if curveTotal(p.Curve) != wantRead || p.Read != wantRead || p.BySignal != wantBy {
			t.Errorf("curve total %d, read %d, by_signal %+v; want %d, %+v", curveTotal(p.Curve), p.Read, p.BySignal, wantRead, wantBy)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		if w := do("GET", "/api/v1/messages/big", "", ""); w.Code != http.StatusUnauthorized {
			t.Errorf("no token = %d", w.Code)
		}
		if w := do("GET", "/api/v1/messages/big", "other-corp-token-0123456789", ""); w.Code != http.StatusNotFound {
			t.Errorf("other corp = %d", w.Code)
		}
		if w := do("POST", "/api/v1/messages/big/remind", token, ""); w.Code != http.StatusServiceUnavailable {
			t.Errorf("remind without a WeCom sender = %d; want 503", w.Code)
		}
	})

	t.Run("keys gone are rebuilt from MySQL", func(t *testing.T) {
		var keys []string
		iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if len(keys) == 0 {
			t.Fatal("no keys under the prefix")
		}
		testenv.Check(t, "del", rdb.Del(ctx, keys...).Err())
		check(t)
	})
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
