package dashboard

import (
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
)

// newFollowFixture is the campaign fixture with a real round engine on
// the same MariaDB database, its minimum delay one minute.
func newFollowFixture(tb testing.TB) (*fixture, *sql.DB) {
	tb.Helper()
	db := testenv.MySQL(tb)
	f := newFixtureOpts(tb, false, func(o *deps) {
		s, err := store.New(db, store.Options{Directory: o.Mapper,
			Apps: o.Apps, Now: o.Now})
		testenv.Check(tb, "store.New", err)
		o.Campaigns = s
		o.FollowUps = &loops.Rounds{DB: db, Now: o.Now, MinGap: time.Minute, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Zone: func(string) *time.Location { return time.UTC }}
	})
	return f, db
}

func storedPolicy(t *testing.T, db *sql.DB, msgID string) string {
	t.Helper()
	var p string
	err := db.QueryRow(`SELECT policy FROM follow_ups WHERE msgid = ?`, msgID).Scan(&p)
	if err == sql.ErrNoRows {
		return ""
	}
	testenv.Check(t, "policy", err)
	return p
}

// TestPostFollowUpRefused: each bad policy is a 400 naming its field, for
// a notice sent now, a scheduled one and a draft, and nothing is written:
// no message, no notice, no policy.
func TestPostFollowUpRefused(t *testing.T) {
	f, db := newFollowFixture(t)
	now := f.clock.Now()
	sendAt := now.Add(2 * time.Hour)
	eleven := `"1h","2h","3h","4h","5h","6h","7h","8h","9h","10h","11h"`
	cases := []struct{ name, policy, field string }{
		{"delay under the minimum", `{"reminders":["30s"]}`, "reminders"},
		{"time of day that does not parse", `{"reminders":["next 25:00"]}`, "reminders"},
		{"deadline before the send", `{"reminders":["2h"],"deadline":"` + now.Add(-time.Hour).Format(time.RFC3339) + `"}`, "deadline"},
		{"working hours ending before they start", `{"reminders":["2h"],"working_hours":"19:00-09:00"}`, "working_hours"},
		{"more than 10 rounds", `{"reminders":[` + eleven + `]}`, "reminders"},
		{"escalation after a round that does not exist", `{"reminders":["2h"],"escalate_after":3}`, "escalate_after"},
	}
	modes := []struct{ name, extra string }{
		{"now", `"send":true`},
		{"scheduled", `"send":true,"send_at":"` + sendAt.Format(time.RFC3339) + `"`},
		{"draft", `"draft":true`},
	}
	for i, c := range cases {
		for _, m := range modes {
			t.Run(c.name+"/"+m.name, func(t *testing.T) {
				id := fmt.Sprintf("bad-%d-%s", i, m.name)
				body := `{"msgid":"` + id + `","app":"hr","title":"新考勤制度","audience":{"userids":["alice"]},` + m.extra + `,"follow_up":` + c.policy + `}`
				code, j := f.api(t, "POST", "/messages", body)
				if code != 400 || j["field"] != "follow_up."+c.field {
					t.Fatalf("POST: %d %v; want 400 naming %s", code, j, c.field)
				}
				if code, _ := f.api(t, "GET", "/messages/"+id, ""); code != 404 {
					t.Errorf("GET after a refused POST: %d; want 404", code)
				}
				if p := storedPolicy(t, db, id); p != "" {
					t.Errorf("policy stored after a refused POST: %s", p)
				}
			})
		}
	}
}

// TestPostFollowUp: a policy posted with a notice is stored and shown in
// the message JSON, for one sent now, one scheduled and a draft; PATCH
// replaces a draft's policy, and a bad PATCH changes nothing.
func TestPostFollowUp(t *testing.T) {
	f, db := newFollowFixture(t)
	now := f.clock.Now().UTC()

	code, j := f.api(t, "POST", "/messages", `{"msgid":"fu-now","app":"hr","title":"新考勤制度","audience":{"userids":["zhangsan"]},"send":true,
		"follow_up":{"reminders":["2h","1d"],"escalate_after":1}}`)
	if code != 201 || j["follow_up"] == nil {
		t.Fatalf("POST now: %d %v", code, j)
	}
	if p := storedPolicy(t, db, "fu-now"); !strings.Contains(p, `"2h"`) || !strings.Contains(p, `"escalate_after":1`) {
		t.Fatalf("stored policy %q", p)
	}
	// The engine plans from the messages row (the tracker's, faked here).
	_, err := db.Exec(`INSERT INTO messages (corp_id, msgid, app, agent_id, title, sent_at, recipient_count, audience_hash, state)
		VALUES ('acme', 'fu-now', 'hr', 1000002, '新考勤制度', ?, 1, ?, 1)`, now, strings.Repeat("0", 64))
	testenv.Check(t, "insert message", err)
	code, j = f.api(t, "GET", "/messages/fu-now", "")
	fu, _ := j["follow_up"].(map[string]any)
	if code != 200 || fu == nil {
		t.Fatalf("GET: %d %v", code, j)
	}
	if fu["next_round"] != float64(1) || fu["next_at"] != now.Add(2*time.Hour).Format(time.RFC3339Nano) {
		t.Errorf("next round %v at %v; want 1 at %s", fu["next_round"], fu["next_at"], now.Add(2*time.Hour).Format(time.RFC3339Nano))
	}
	if rs, _ := fu["rounds"].([]any); rs == nil || len(rs) != 0 {
		t.Errorf("rounds %v; want []", fu["rounds"])
	}
	if pol := fu["policy"].(map[string]any); pol["escalate_after"] != float64(1) || len(pol["reminders"].([]any)) != 2 {
		t.Errorf("policy %v", pol)
	}

	at := now.Add(time.Hour)
	code, j = f.api(t, "POST", "/messages", `{"msgid":"fu-sched","app":"hr","title":"新考勤制度","audience":{"userids":["alice"]},"send":true,
		"send_at":"`+at.Format(time.RFC3339)+`","follow_up":{"reminders":["30m"],"deadline":"`+at.Add(2*time.Hour).Format(time.RFC3339)+`"}}`)
	if code != 201 || j["state"] != "scheduled" || j["follow_up"] == nil {
		t.Fatalf("POST scheduled: %d %v", code, j)
	}
	if code, j = f.api(t, "GET", "/messages/fu-sched", ""); code != 200 || j["follow_up"] == nil {
		t.Fatalf("GET scheduled: %d %v", code, j)
	}
	// The deadline was checked against send_at: a deadline between now
	// and send_at is refused.
	code, j = f.api(t, "PATCH", "/messages/fu-sched", `{"follow_up":{"reminders":["30m"],"deadline":"`+now.Add(30*time.Minute).Format(time.RFC3339)+`"}}`)
	if code != 400 || j["field"] != "follow_up.deadline" {
		t.Fatalf("PATCH deadline before send_at: %d %v", code, j)
	}

	code, j = f.api(t, "POST", "/messages", `{"msgid":"fu-draft","app":"hr","title":"草稿","audience":{"userids":["alice"]},"draft":true,
		"follow_up":{"reminders":["2h"]}}`)
	if code != 201 || j["state"] != "draft" || j["follow_up"] == nil {
		t.Fatalf("POST draft: %d %v", code, j)
	}
	before := storedPolicy(t, db, "fu-draft")
	code, j = f.api(t, "PATCH", "/messages/fu-draft", `{"title":"改过的标题","follow_up":{"reminders":["1h","next 9:61"]}}`)
	if code != 400 || j["field"] != "follow_up.reminders" {
		t.Fatalf("bad PATCH: %d %v", code, j)
	}
	if after := storedPolicy(t, db, "fu-draft"); after != before {
		t.Errorf("a refused PATCH changed the policy: %s -> %s", before, after)
	}
	if _, j = f.api(t, "GET", "/messages/fu-draft", ""); j["title"] != "草稿" {
		t.Errorf("a refused PATCH changed the title: %v", j["title"])
	}
	code, j = f.api(t, "PATCH", "/messages/fu-draft", `{"title":"改过的标题","follow_up":{"reminders":["1h","next 09:30"],"working_hours":"09:00-19:00","working_days":"mon-fri"}}`)
	if code != 200 || j["title"] != "改过的标题" {
		t.Fatalf("PATCH: %d %v", code, j)
	}
	if p := storedPolicy(t, db, "fu-draft"); !strings.Contains(p, "next 09:30") || !strings.Contains(p, "09:00-19:00") {
		t.Errorf("policy after PATCH: %s", p)
	}
}

// TestPostFollowUpAppDefault: a POST without "follow_up" gets the app's
// default policy (apps[].follow_up), now, scheduled or as a draft; an
// explicit null gets none and an explicit policy is kept; GET /apps
// gives the compose page the default.
func TestPostFollowUpAppDefault(t *testing.T) {
	db := testenv.MySQL(t)
	def := yidu.Policy{Reminders: []string{"2h", "next 09:30"}, EscalateAfter: 1}
	f := newFixtureOpts(t, false, func(o *deps) {
		o.Apps[0].FollowUp = &def
		s, err := store.New(db, store.Options{Directory: o.Mapper,
			Apps: o.Apps, Now: o.Now})
		testenv.Check(t, "store.New", err)
		o.Campaigns = s
		o.FollowUps = &loops.Rounds{DB: db, Now: o.Now, MinGap: time.Minute, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Zone: func(string) *time.Location { return time.UTC }}
	})
	code, j := f.api(t, "GET", "/apps", "")
	apps, _ := j["apps"].([]any)
	if code != 200 || len(apps) == 0 {
		t.Fatalf("GET /apps: %d %v", code, j)
	}
	if fu, _ := apps[0].(map[string]any)["follow_up"].(map[string]any); fu == nil || fu["escalate_after"] != float64(1) {
		t.Errorf("GET /apps: app %v; want its default follow_up", apps[0])
	}
	sendAt := f.clock.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	tests := []struct {
		name, extra, want string
	}{
		{"now, none named", `"send":true`, `{"reminders":["2h","next 09:30"],"escalate_after":1}`},
		{"scheduled, none named", `"send":true,"send_at":"` + sendAt + `"`, `{"reminders":["2h","next 09:30"],"escalate_after":1}`},
		{"draft, none named", `"draft":true`, `{"reminders":["2h","next 09:30"],"escalate_after":1}`},
		{"now, null", `"send":true,"follow_up":null`, ""},
		{"draft, null", `"draft":true,"follow_up":null`, ""},
		{"now, its own", `"send":true,"follow_up":{"reminders":["1d"]}`, `{"reminders":["1d"]}`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("def-%d", i)
			code, j := f.api(t, "POST", "/messages", `{"msgid":"`+id+`","app":"hr","title":"新考勤制度","audience":{"userids":["alice"]},`+tt.extra+`}`)
			if code != 201 {
				t.Fatalf("POST: %d %v", code, j)
			}
			if got := storedPolicy(t, db, id); got != tt.want {
				t.Errorf("stored policy %q; want %q", got, tt.want)
			}
			if (j["follow_up"] != nil) != (tt.want != "") {
				t.Errorf("answer's follow_up %v; want one: %v", j["follow_up"], tt.want != "")
			}
		})
	}
	code, j = f.api(t, "POST", "/messages", `{"msgid":"def-bad","app":"hr","title":"t","audience":{"userids":["alice"]},"send":true,"follow_up":{"reminders":"2h"}}`)
	if code != 400 || !strings.Contains(fmt.Sprint(j["error"]), "follow_up.reminders") {
		t.Errorf("a follow_up of the wrong shape: %d %v; want 400 naming follow_up.reminders", code, j)
	}
}
