package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/dashboard/internal/trail"
	"github.com/yidu-io/yidu/internal/testenv"
)

// followUpsFake accepts every policy and has one round to cancel.
type followUpsFake struct{ rounds int }

func (f *followUpsFake) SetPolicy(context.Context, string, string, yidu.Policy, string) error {
	f.rounds = 1
	return nil
}

func (f *followUpsFake) FollowUpOf(context.Context, string, string) (loops.FollowUp, bool, error) {
	return loops.FollowUp{}, true, nil
}

func (f *followUpsFake) CancelRound(context.Context, string, string) (bool, error) {
	ok := f.rounds > 0
	f.rounds = 0
	return ok, nil
}

func (f *followUpsFake) CheckPolicy(yidu.Policy, time.Time) error { return nil }

func (f *followUpsFake) StorePolicy(context.Context, string, string, yidu.Policy, time.Time, string) error {
	f.rounds = 1
	return nil
}

// TestAuditEndToEnd performs every audited action once through the
// dashboard, with the MySQL recorder on MariaDB, and checks that each
// left exactly one row with its actor, action, msgid and people, that no
// row holds the bearer token or the password, and that GET /api/v1/audit
// pages through them for an admin and refuses anyone else.
func TestAuditEndToEnd(t *testing.T) {
	db := testenv.MySQL(t)
	rec := audit.NewMySQL(db)
	f := newFixtureOpts(t, false, func(o *deps) {
		s, err := store.New(db, store.Options{Directory: o.Mapper,
			Apps: o.Apps, Now: o.Now})
		testenv.Check(t, "store.New", err)
		o.Campaigns, o.Audit, o.AuditLog, o.FollowUps = s, rec, rec, &followUpsFake{}
	})
	must := func(method, target, body string, want int) {
		t.Helper()
		var w = f.do(t, method, target, acmeToken, nil)
		if body != "" {
			w = f.do(t, method, target, acmeToken, strings.NewReader(body))
		}
		if w.Code != want {
			t.Fatalf("%s %s = %d %s; want %d", method, target, w.Code, w.Body.String(), want)
		}
	}
	at := f.clock.Now().Add(time.Hour).Format(time.RFC3339)

	f.postLogin("alice", "wrong-password", nil)
	c, csrf := f.login(t)
	must("POST", "/api/v1/messages", `{"msgid":"e2e-compose","app":"hr","title":"t","audience":{"userids":["zhangsan"]}}`, 201)
	must("POST", "/api/v1/messages", `{"msgid":"e2e-send","app":"hr","title":"t","send":true,"audience":{"userids":["zhangsan","lisi"]}}`, 201)
	must("POST", "/api/v1/messages", `{"msgid":"e2e-draft","app":"hr","title":"t","draft":true,"audience":{"userids":["alice"]}}`, 201)
	must("POST", "/api/v1/messages", `{"msgid":"e2e-sched","app":"hr","title":"t","send":true,"send_at":"`+at+`","audience":{"userids":["alice"]}}`, 201)
	must("PATCH", "/api/v1/messages/e2e-sched", `{"title":"t2"}`, 200)
	must("POST", "/api/v1/messages/e2e-sched/cancel", "", 200)
	must("POST", "/api/v1/messages/e2e-draft/send", "", 202)
	must("POST", "/api/v1/messages/hello/remind", "", 200)
	must("PUT", "/api/v1/messages/hello/follow_up", `{"reminders":["2h"]}`, 200)
	must("POST", "/api/v1/messages/hello/follow_up/cancel-round", "", 200)
	must("GET", "/api/v1/messages/hello/export.csv?state=all", "", 200)
	f.sent(t, f.hello, t0)
	must("POST", "/api/v1/messages/hello/recall", "", 200)
	// A hostile body is refused before anything runs: no row.
	must("POST", "/api/v1/messages", `{"msgid":"e2e bad","app":"hr"}`, 400)
	// The admin page (操作日志), server-rendered in the default language;
	// viewing it records nothing.
	if w := f.page(c, "/audit?action=remind"); w.Code != 200 || !strings.Contains(w.Body.String(), "操作日志") ||
		!strings.Contains(w.Body.String(), `data-action="remind"`) || strings.Contains(w.Body.String(), `data-action="send"`) {
		t.Fatalf("audit page: %d %s", w.Code, w.Body.String())
	}
	if w := f.page(c, "/audit?limit=9999"); w.Code != 400 {
		t.Errorf("audit page with a bad limit: %d", w.Code)
	}
	if code := f.request(t, "POST", "/logout", c, csrf); code != http.StatusSeeOther {
		t.Fatalf("logout %d", code)
	}

	type row struct{ action, msgid, actor, kind, outcome string }
	want := map[row]int64{ // each once, with how many people it touched
		{"sign_in_failed", "", "alice", "password", "refused"}: 0,
		{"sign_in", "", "alice", "password", "ok"}:             0,
		{"compose", "e2e-compose", "acme", "token", "ok"}:      1,
		{"send", "e2e-send", "acme", "token", "ok"}:            2,
		{"compose", "e2e-draft", "acme", "token", "ok"}:        0,
		{"schedule", "e2e-sched", "acme", "token", "ok"}:       0,
		{"edit", "e2e-sched", "acme", "token", "ok"}:           0,
		{"cancel", "e2e-sched", "acme", "token", "ok"}:         0,
		{"send", "e2e-draft", "acme", "token", "ok"}:           0,
		{"remind", "hello", "acme", "token", "ok"}:             -1, // the fake's unread count
		{"follow_up_change", "hello", "acme", "token", "ok"}:   0,
		{"export", "hello", "acme", "token", "started"}:        10, // streamed: its start, then its end
		{"export", "hello", "acme", "token", "ok"}:             10,
		{"recall", "hello", "acme", "token", "ok"}:             -1,
		{"sign_out", "", "alice", "password", "ok"}:            0,
	}
	rows, err := db.Query(`SELECT action, msgid, actor, actor_kind, outcome, role, people, COUNT(*) FROM audit_events
		GROUP BY action, msgid, actor, actor_kind, outcome, role, people`)
	testenv.Check(t, "query", err)
	seen := map[row]int{}
	for rows.Next() {
		var r row
		var role string
		var people, n int64
		testenv.Check(t, "scan", rows.Scan(&r.action, &r.msgid, &r.actor, &r.kind, &r.outcome, &role, &people, &n))
		p, ok := want[r]
		switch {
		case !ok:
			t.Errorf("unexpected audit rows %+v ×%d", r, n)
		case p >= 0 && people != p:
			t.Errorf("%+v touched %d people, want %d", r, people, p)
		case r.kind == "token" && role != "admin":
			t.Errorf("%+v role %q, want admin", r, role)
		}
		seen[r] += int(n)
	}
	testenv.Check(t, "rows", rows.Err())
	for r := range want {
		if r.action == "follow_up_change" {
			if seen[r] != 2 { // the policy and the cancelled round
				t.Errorf("%+v: %d rows, want 2", r, seen[r])
			}
			continue
		}
		if seen[r] != 1 {
			t.Errorf("%+v: %d rows, want exactly 1", r, seen[r])
		}
	}
	leaks := testenv.Column[int64](t, db, `SELECT COUNT(*) FROM audit_events WHERE
		CONCAT_WS(' ', actor, actor_kind, role, action, corp_id, app, msgid, client_ip, user_agent, outcome, detail) LIKE ?
		OR CONCAT_WS(' ', actor, user_agent, detail) LIKE ? OR CONCAT_WS(' ', actor, detail) LIKE ?`,
		"%"+acmeToken+"%", "%"+password+"%", "%wrong-password%")
	if leaks[0] != 0 {
		t.Errorf("%d audit rows carry the token or a password", leaks[0])
	}

	// The reader: an admin of every corp pages through all of them; an
	// admin of acme sees acme's; a filter narrows; hostile params are 400.
	var all []trail.EventJSON
	cursor := ""
	for range 20 {
		w := f.do(t, "GET", "/api/v1/audit?limit=4&cursor="+cursor, adminToken, nil)
		if w.Code != 200 {
			t.Fatalf("audit page: %d %s", w.Code, w.Body.String())
		}
		var page trail.ListJSON
		testenv.Check(t, "decode", json.Unmarshal(w.Body.Bytes(), &page))
		all = append(all, page.Events...)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if len(all) != 16 || all[0].Action != "sign_out" || all[15].Action != "sign_in_failed" {
		t.Fatalf("admin read %d events (first %+v)", len(all), all[0])
	}
	w := f.do(t, "GET", "/api/v1/audit?action=send&msgid=e2e-send", acmeToken, nil)
	var page trail.ListJSON
	testenv.Check(t, "decode", json.Unmarshal(w.Body.Bytes(), &page))
	if w.Code != 200 || len(page.Events) != 1 || page.Events[0].People != 2 || page.Events[0].CorpID != "acme" {
		t.Errorf("acme's filtered audit: %d %s", w.Code, w.Body.String())
	}
	if w := f.do(t, "GET", "/api/v1/audit", otherToken, nil); w.Code != 200 || strings.Contains(w.Body.String(), "acme") {
		t.Errorf("other corp's admin sees acme's events: %d %s", w.Code, w.Body.String())
	}
	for _, q := range []string{"limit=0", "limit=501", "cursor=-1", "cursor=abc", "since=yesterday", "action=drop", "msgid=a%20b", "actor=%07"} {
		field := strings.SplitN(q, "=", 2)[0]
		if w := f.do(t, "GET", "/api/v1/audit?"+q, adminToken, nil); w.Code != 400 || !strings.Contains(w.Body.String(), field) {
			t.Errorf("GET /audit?%s = %d %s; want 400 naming %s", q, w.Code, w.Body.String(), field)
		}
	}
}
