package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/campaign/cards"
	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
)

// quietNotifier takes every approval message (the WeCom card and texts
// are campaign's tests'); its outcome is what the audit's notify rows
// say.
type quietNotifier struct{}

func (quietNotifier) AskApproval(context.Context, yidu.Notice, string, string, uint64, []string) error {
	return nil
}
func (quietNotifier) Decided(context.Context, yidu.Notice, store.ApprovalStep) error {
	return nil
}

// countingRegistrar counts the Runner's sends by msgid.
type countingRegistrar struct {
	mu   sync.Mutex
	sent map[string]int
}

func (c *countingRegistrar) RegisterAndSend(_ context.Context, reg yidu.Registration) (yidu.Registered, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent[reg.MsgID]++
	return yidu.Registered{}, nil
}

// TestApprovalAuditRows is issue 41's "every step is an audit row: who,
// when, which version", read back from GET /api/v1/audit on MariaDB:
// the request (by the author, with the recipients), the approvers told,
// the author's own 批准 refused, 驳回 on the page (with its reason), the
// author told, a new request after the edit, 批准 pressed on the WeCom
// card twice (one decision, one row: a second press of a decided
// version changes nothing and writes nothing), and a scheduled notice
// held at its time by yidu (待审批), its author told.
func TestApprovalAuditRows(t *testing.T) {
	const reviewerTok = "reviewer-token-0123456789"
	var st *store.Store
	f := newFixtureOpts(t, false, func(o *deps) {
		o.Apps[0].Approval = &yidu.Approval{Over: 2, Approvers: []string{"reviewer", "acme"}}
		o.Tokens = append(o.Tokens, access.Token{Name: "reviewer", Token: reviewerTok, Grant: access.Grant{Role: yidu.RoleViewer, Scope: yidu.Scope{Corp: "acme", Departments: []int64{4}}}})
		db := testenv.MySQL(t)
		s, err := store.New(db, store.Options{Directory: o.Mapper,
			Apps: o.Apps, Now: o.Now})
		testenv.Check(t, "store.New", err)
		st, o.Campaigns, o.Approvals = s, s, quietNotifier{}
		rec := audit.NewMySQL(db)
		o.Audit, o.AuditLog = rec, rec
	})
	withAudienceDirectory(t, f)
	ctx := t.Context()
	decide := func(tok, hash, reason string, approve bool) int {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"approve": approve, "version_hash": hash, "reason": reason})
		return f.do(t, "POST", "/api/v1/messages/big-a/approval", tok, strings.NewReader(string(b))).Code
	}
	version := func() string {
		t.Helper()
		code, v := f.api(t, "GET", "/messages/big-a/approval", "")
		if code != 200 {
			t.Fatalf("approval view = %d %v", code, v)
		}
		return v["version_hash"].(string)
	}

	if code, j := f.api(t, "POST", "/messages", `{"msgid":"big-a","app":"hr","title":"年终奖发放通知","audience":{"userids":["alice","zhangsan","lisi"]},"send":true}`); code != http.StatusAccepted {
		t.Fatalf("send = %d %v; want 202 pending", code, j)
	}
	v1 := version()
	if code := decide(acmeToken, v1, "", true); code != http.StatusForbidden {
		t.Fatalf("the author's 批准 = %d, want 403", code)
	}
	if code := decide(reviewerTok, v1, "截止日期写错了", false); code != 200 {
		t.Fatalf("驳回 = %d, want 200", code)
	}
	if code, j := f.api(t, "PATCH", "/messages/big-a", `{"body":"请于下周一前确认"}`); code != 200 {
		t.Fatalf("PATCH = %d %v", code, j)
	}
	if code, j := f.api(t, "POST", "/messages/big-a/send", ""); code/100 != 2 || j["approval"] != "pending" {
		t.Fatalf("send again = %d %v; want pending", code, j)
	}
	v2 := version()
	// The receiver's side: the card's 批准 pressed twice (a WeCom retry,
	// or the other replica), as cmd's approvalPresses applies it.
	recv := campaign.New(st, campaign.Options{Notify: quietNotifier{}, Now: f.clock.Now})
	reviewer := access.NewPrincipal("reviewer", access.KindToken, false, []access.Grant{{Role: yidu.RoleViewer,
		Scope: yidu.Scope{Corp: "acme", Departments: []int64{4}}}})
	task := yidu.ApprovalTaskID("big-a", v2, 2)
	for i := range 2 {
		if _, again, err := recv.Press(ctx, reviewer, "acme", "hr", task, cards.ApproveKey); err != nil || again != (i == 1) {
			t.Fatalf("press %d: again %v, %v; want the second one again", i, again, err)
		}
	}

	// A scheduled notice unapproved at its time: held by yidu.
	at := f.clock.Now().Add(time.Hour).Format(time.RFC3339)
	if code, j := f.api(t, "POST", "/messages", `{"msgid":"big-s","app":"hr","title":"全员大会","audience":{"userids":["alice","zhangsan","lisi"]},"send":true,"send_at":"`+at+`"}`); code/100 != 2 || j["approval"] != "pending" {
		t.Fatalf("schedule = %d %v; want pending", code, j)
	}
	vs := func() string {
		n, err := st.Get(ctx, nil, "big-s")
		testenv.Check(t, "Get", err)
		return n.ApprovalHash
	}()
	reg := &countingRegistrar{sent: map[string]int{}}
	run, err := loops.NewRunner(st, reg, loops.RunnerOptions{Owner: "replica-a",
		OnHeld: func(context.Context, yidu.Notice) error { return nil }})
	testenv.Check(t, "NewRunner", err)
	f.clock.Add(61 * time.Minute)
	for range 2 {
		_, err = run.Tick(ctx)
		testenv.Check(t, "Tick", err)
	}
	if reg.sent["big-a"] != 1 || reg.sent["big-s"] != 0 {
		t.Errorf("sent %v; want big-a (approved) once, big-s (held) never", reg.sent)
	}

	type row struct{ action, actor, outcome, detail string }
	list := func(msgid string) []row {
		t.Helper()
		w := f.do(t, "GET", "/api/v1/audit?msgid="+msgid, adminToken, nil)
		var got struct {
			Events []struct {
				At                             time.Time
				Action, Actor, Outcome, Detail string
				People                         int64
			} `json:"events"`
		}
		if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &got) != nil {
			t.Fatalf("GET /api/v1/audit = %d %s", w.Code, w.Body)
		}
		var out []row
		for i := len(got.Events) - 1; i >= 0; i-- { // oldest first
			e := got.Events[i]
			if e.At.IsZero() {
				t.Errorf("%s by %s has no time", e.Action, e.Actor)
			}
			if e.Action == "approval_request" && e.People != 3 {
				t.Errorf("approval_request of %d people, want 3", e.People)
			}
			out = append(out, row{e.Action, e.Actor, e.Outcome, e.Detail})
		}
		return out
	}
	for _, tc := range []struct {
		msgid string
		want  []row
	}{
		{"big-a", []row{
			{"approval_request", "acme", "ok", "version=" + v1},
			{"notify", campaign.System, "ok", "to=approvers count=1 step=requested version=" + v1},
			{"compose", "acme", "ok", ""},
			{"approve", "acme", "refused", "version=" + v1},
			{"reject", "reviewer", "ok", "version=" + v1 + " via=page reason=截止日期写错了"},
			{"notify", campaign.System, "ok", "to=author userid=acme step=rejected version=" + v1},
			{"edit", "acme", "ok", ""},
			{"approval_request", "acme", "ok", "version=" + v2},
			{"notify", campaign.System, "ok", "to=approvers count=1 step=requested version=" + v2},
			{"send", "acme", "ok", "send_now"},
			{"approve", "reviewer", "ok", "version=" + v2 + " via=card"},
			{"notify", campaign.System, "ok", "to=author userid=acme step=approved version=" + v2},
		}},
		{"big-s", []row{
			{"approval_request", "acme", "ok", "version=" + vs},
			{"notify", campaign.System, "ok", "to=approvers count=1 step=requested version=" + vs},
			{"schedule", "acme", "ok", ""},
			{"hold", campaign.System, "ok", "version=" + vs + " reason=待审批"},
			{"notify", campaign.System, "ok", "to=author userid=acme step=held version=" + vs},
		}},
	} {
		got := list(tc.msgid)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %d audit rows, want %d:\n got %q\nwant %q", tc.msgid, len(got), len(tc.want), got, tc.want)
			continue
		}
		for i, w := range tc.want {
			g := got[i]
			if g.action != w.action || g.actor != w.actor || g.outcome != w.outcome || !strings.HasPrefix(g.detail, w.detail) {
				t.Errorf("%s row %d = %q, want %q", tc.msgid, i, g, w)
			}
		}
	}
}
