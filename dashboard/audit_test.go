package dashboard

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/campaign/loops"
)

// recorderFake keeps the events, or fails every write.
type recorderFake struct {
	mu     sync.Mutex
	events []audit.Event
	fail   bool
}

func (r *recorderFake) Record(_ context.Context, e audit.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail {
		return errors.New("mysql down")
	}
	r.events = append(r.events, e)
	return nil
}

// TestAuditTrail: a sign-in, a failed one and an export leave their
// events (the export two: started, then ok), never the password or the
// token; an export whose event cannot be written is refused (fail
// closed) and counted.
func TestAuditTrail(t *testing.T) {
	rec := &recorderFake{}
	f := newFixtureOpts(t, false, func(o *deps) { o.Audit = rec; o.Standing = oneStanding{} })
	f.postLogin("alice", "wrong-password", nil)
	f.login(t)
	f.ok(t, "GET", "/api/v1/messages/hello/export.csv?state=all")
	var got []string
	for _, e := range rec.events {
		got = append(got, e.Actor+":"+string(e.Action)+":"+e.Outcome)
		blob := strings.Join([]string{e.Actor, e.Detail, e.UserAgent, e.ClientIP}, " ")
		if strings.Contains(blob, "wrong-password") || strings.Contains(blob, acmeToken) || strings.Contains(blob, password) {
			t.Errorf("event %+v carries a secret", e)
		}
	}
	// The export is streamed: a row before its first byte, one at its end.
	if len(rec.events) != 4 || rec.events[0].Action != yidu.ActionSignInFailed || rec.events[1].Action != yidu.ActionSignIn {
		t.Fatalf("events %v", got)
	}
	for i, outcome := range []string{"started", "ok"} {
		if e := rec.events[2+i]; e.Action != yidu.ActionExport || e.MsgID != "hello" || e.Detail != "state=all" || e.Outcome != outcome {
			t.Fatalf("events %v; want the export started, then ok", got)
		}
	}

	// The standing report leaves after the row its service returned.
	if w := f.do(t, "GET", "/api/v1/standing", acmeToken, nil); w.Code != 200 || !strings.Contains(w.Body.String(), `"msgid":"hello"`) {
		t.Errorf("standing report: %d %q; want 200 and hello's rule", w.Code, w.Body.String())
	}
	if e := rec.events[len(rec.events)-1]; e.Action != yidu.ActionExport || e.Detail != "standing" || e.People != 1 || e.Outcome != "ok" {
		t.Errorf("standing report's row %+v; want the export its service returned", e)
	}

	rec.fail = true
	w := f.do(t, "GET", "/api/v1/messages/hello/export.csv?state=all", acmeToken, nil)
	if w.Code != 503 || strings.Contains(w.Body.String(), "userid") {
		t.Errorf("export with the audit down: %d %q; want 503 and no data", w.Code, w.Body.String())
	}
	// The standing notices' report too (issue 51): no row, no report.
	for _, path := range []string{"/api/v1/standing", "/api/v1/standing.csv"} {
		if w := f.do(t, "GET", path, acmeToken, nil); w.Code != 503 || strings.Contains(w.Body.String(), "msgid") {
			t.Errorf("%s with the audit down: %d %q; want 503 and no report", path, w.Code, w.Body.String())
		}
	}
}

// oneStanding has one standing rule in force, hello's, reported with
// its row.
type oneStanding struct{ Standing }

func (oneStanding) Report(_ context.Context, who *access.Principal, _ loops.Seer) ([]loops.StandingRule, audit.Event, error) {
	row := who.Event(yidu.ActionExport, "", "", "")
	row.People, row.Detail = 1, "standing"
	return []loops.StandingRule{{MsgID: "hello", App: "hr", Title: "hello"}}, row, nil
}
