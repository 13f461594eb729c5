package dashboard

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/tracker"
)

// The tests in this file run the API on the real tracker, bitmap and idmap
// and make Redis or MySQL fail under it: every answer is the documented
// 503 "temporarily unavailable" (docs/api.md), so clients retry, and no
// answer leaks the backend's error.

type failEnv struct {
	h     http.Handler
	token string
	logs  *testenv.SyncBuffer
}

// newFailEnv serves the API on db and rdb with the real providers.
func newFailEnv(tb testing.TB, db *sql.DB, rdb redis.UniversalClient, corp string) *failEnv {
	tb.Helper()
	logs := &testenv.SyncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	mapper, err := idmap.New(db, idmap.Options{Logger: logger})
	testenv.Check(tb, "idmap.New", err)
	store, err := bitmap.New(rdb, bitmap.Options{Prefix: "dash", Logger: logger, RoundTripTimeout: 10 * time.Second})
	testenv.Check(tb, "bitmap.New", err)
	tb.Cleanup(store.Close)
	app := yidu.App{Name: "hr", CorpID: corp, AgentID: 1000002}
	reg, err := tracker.New(db, mapper, store, tracker.Options{Logger: logger, Apps: []yidu.App{app}})
	testenv.Check(tb, "tracker.New", err)
	const token = "failure-token-0123456789"
	srv, err := newServer(reg, store, mapper, deps{Options: Options{Apps: []yidu.App{app}, Logger: logger},
		Tokens: []access.Token{{Name: "it", Token: token, Corps: []string{corp}}}})
	testenv.Check(tb, "New", err)
	tb.Cleanup(srv.Close)
	return &failEnv{h: srv.Routes(), token: token, logs: logs}
}

func (e *failEnv) do(tb testing.TB, method, target, body string) *httptest.ResponseRecorder {
	tb.Helper()
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	r.Header.Set("Authorization", "Bearer "+e.token)
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r.WithContext(ctx))
	return w
}

// wantUnavailable checks w is the documented 503 with nothing of the
// backend's error in the body.
func wantUnavailable(t *testing.T, what string, w *httptest.ResponseRecorder) {
	t.Helper()
	var body struct{ Error string }
	if err := json.Unmarshal(w.Body.Bytes(), &body); w.Code != http.StatusServiceUnavailable || err != nil || body.Error != "temporarily unavailable" {
		t.Errorf("%s = %d %q; want 503 {\"error\":\"temporarily unavailable\"}", what, w.Code, w.Body)
	}
}

func TestAPIRedisDown(t *testing.T) {
	db := testenv.MySQL(t)
	own := testenv.StartRedis(t)
	rdb := own.Client
	corp := testenv.RandomName("corp")
	newSynthCorp(30).load(t, db, corp)
	e := newFailEnv(t, db, rdb, corp)
	sent := time.Now().UTC().Add(-time.Hour).Truncate(time.Second).Format(time.RFC3339)
	if w := e.do(t, "POST", "/api/v1/messages", fmt.Sprintf(`{"msgid":"m1","app":"hr","title":"通知","sent_at":%q,"audience":{"departments":[1]}}`, sent)); w.Code != http.StatusCreated {
		t.Fatalf("register = %d: %s", w.Code, w.Body)
	}
	if w := e.do(t, "GET", "/api/v1/messages/m1", ""); w.Code != http.StatusOK {
		t.Fatalf("GET message with Redis up = %d: %s", w.Code, w.Body)
	}
	own.Kill(t)
	for _, path := range []string{"/api/v1/messages/m1", "/api/v1/messages/m1/progress", "/api/v1/messages/m1/departments",
		"/api/v1/messages/m1/recipients", "/api/v1/messages/m1/export.csv"} {
		wantUnavailable(t, "GET "+path+" with Redis down", e.do(t, "GET", path, ""))
	}
	// The list shows live counts too.
	wantUnavailable(t, "GET /api/v1/messages with Redis down", e.do(t, "GET", "/api/v1/messages", ""))
	if !strings.Contains(e.logs.String(), "request failed") {
		t.Errorf("no 5xx was logged")
	}
}

func TestAPIMySQLDown(t *testing.T) {
	// Nothing listens on port 1: every connection is refused, as with a
	// MySQL that is down.
	db, err := sql.Open("mysql", "root@tcp(127.0.0.1:1)/yidu?timeout=2s")
	testenv.Check(t, "sql.Open", err)
	t.Cleanup(func() { db.Close() })
	rdb, _ := testenv.Redis(t)
	corp := testenv.RandomName("corp")
	e := newFailEnv(t, db, rdb, corp)
	for _, path := range []string{"/api/v1/messages", "/api/v1/messages/m1", "/api/v1/messages/m1/progress"} {
		wantUnavailable(t, "GET "+path+" with MySQL down", e.do(t, "GET", path, ""))
	}
	sent := time.Now().UTC().Add(-time.Hour).Truncate(time.Second).Format(time.RFC3339)
	wantUnavailable(t, "POST /messages with MySQL down", e.do(t, "POST", "/api/v1/messages",
		fmt.Sprintf(`{"msgid":"m2","app":"hr","title":"t","sent_at":%q,"audience":{"userids":["u000001"]}}`, sent)))
}
