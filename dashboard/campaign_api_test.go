package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
)

// newCampaignFixture is the fixture with a real store.Store on a fresh
// MariaDB database, on the fixture's clock.
func newCampaignFixture(tb testing.TB) (*fixture, *store.Store) {
	tb.Helper()
	var st *store.Store
	f := newFixtureOpts(tb, false, func(o *deps) {
		db := testenv.MySQL(tb)
		s, err := store.New(db, store.Options{Directory: o.Mapper,
			Apps: o.Apps, Now: o.Now})
		testenv.Check(tb, "store.New", err)
		st, o.Campaigns = s, s
		// The audit on the same database (GET /audit in the contract test).
		rec := audit.NewMySQL(db)
		o.Audit, o.AuditLog = rec, rec
	})
	return f, st
}

func (f *fixture) api(t *testing.T, method, target, body string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, apiPrefix+target, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+acmeToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, req)
	var out map[string]any
	_ = json.Unmarshal(w.Body.Bytes(), &out)
	return w.Code, out
}

func TestScheduleAPI(t *testing.T) {
	f, st := newCampaignFixture(t)
	at := f.clock.Now().Add(time.Hour).Format(time.RFC3339)
	code, j := f.api(t, "POST", "/messages", `{"msgid":"sched-1","app":"hr","title":"新考勤制度","audience":{"userids":["alice"]},"send":true,"send_at":"`+at+`"}`)
	if code != 201 || j["state"] != "scheduled" || j["send_at"] == nil || j["recipients"].(float64) != 0 {
		t.Fatalf("schedule: %d %v", code, j)
	}
	code, j = f.api(t, "POST", "/messages", `{"msgid":"draft-1","app":"hr","title":"草稿","audience":{"departments":[2]},"draft":true}`)
	if code != 201 || j["state"] != "draft" || j["send_at"] != nil {
		t.Fatalf("draft: %d %v", code, j)
	}
	code, j = f.api(t, "GET", "/messages/sched-1", "")
	if code != 200 || j["state"] != "scheduled" || j["audience"].(map[string]any)["userids"].([]any)[0] != "alice" {
		t.Fatalf("get: %d %v", code, j)
	}
	code, j = f.api(t, "GET", "/messages?state=draft", "")
	if ms := j["messages"].([]any); code != 200 || len(ms) != 1 || ms[0].(map[string]any)["msgid"] != "draft-1" {
		t.Fatalf("list drafts: %d %v", code, j)
	}
	code, j = f.api(t, "PATCH", "/messages/sched-1", `{"title":"新考勤制度（修订）"}`)
	if code != 200 || j["title"] != "新考勤制度（修订）" {
		t.Fatalf("patch: %d %v", code, j)
	}
	code, j = f.api(t, "GET", "/apps", "")
	if apps := j["apps"].([]any); code != 200 || len(apps) != 1 || apps[0].(map[string]any)["timezone"] != "Asia/Shanghai" ||
		apps[0].(map[string]any)["confirm_over"].(float64) != DefaultConfirmOver {
		t.Fatalf("apps: %d %v", code, j)
	}
	// Bad input: 400 with the field, nothing written.
	bad := []struct{ name, body, field string }{
		{"title over the card", `{"app":"hr","title":"` + strings.Repeat("长", 37) + `","audience":{"all":true},"send":true,"send_at":"` + at + `"}`, "title"},
		{"empty audience", `{"app":"hr","title":"t","audience":{},"send":true,"send_at":"` + at + `"}`, "audience"},
		{"only unknown userids", `{"app":"hr","title":"t","audience":{"userids":["ghost"]},"send":true,"send_at":"` + at + `"}`, "audience.userids"},
		{"send_at in the past", `{"app":"hr","title":"t","audience":{"all":true},"send":true,"send_at":"` + f.clock.Now().Add(-time.Minute).Format(time.RFC3339) + `"}`, "send_at"},
		{"send_at over a year", `{"app":"hr","title":"t","audience":{"all":true},"send":true,"send_at":"` + f.clock.Now().AddDate(1, 1, 0).Format(time.RFC3339) + `"}`, "send_at"},
		{"send_at without send", `{"app":"hr","title":"t","audience":{"all":true},"send_at":"` + at + `"}`, "send"},
	}
	for _, tc := range bad {
		code, j := f.api(t, "POST", "/messages", tc.body)
		if code != 400 || j["field"] != tc.field {
			t.Errorf("%s: %d %v, want 400 field %s", tc.name, code, j, tc.field)
		}
	}
	if ns, _, _ := st.List(t.Context(), nil, "", "", "", 50, nil); len(ns) != 2 {
		t.Errorf("%d notices stored, want 2 (refused input writes nothing)", len(ns))
	}
	// Cancel; then edit and cancel again are 409; a registered message too.
	if code, j = f.api(t, "POST", "/messages/sched-1/cancel", ""); code != 200 || j["state"] != "cancelled" {
		t.Fatalf("cancel: %d %v", code, j)
	}
	for _, c := range []struct{ method, target, body string }{
		{"PATCH", "/messages/sched-1", `{"title":"x"}`},
		{"POST", "/messages/sched-1/cancel", ""},
		{"POST", "/messages/hello/cancel", ""},
		{"PATCH", "/messages/hello", `{"title":"x"}`},
	} {
		if code, _ := f.api(t, c.method, c.target, c.body); code != http.StatusConflict {
			t.Errorf("%s %s: %d, want 409", c.method, c.target, code)
		}
	}
	if code, j = f.api(t, "POST", "/messages/draft-1/send", ""); code != 202 || j["state"] != "scheduled" {
		t.Fatalf("send now: %d %v", code, j)
	}
	if code, _ = f.api(t, "GET", "/messages?state=maybe", ""); code != 400 {
		t.Errorf("bad state: %d", code)
	}
	// A registered message carries state sent.
	if _, j = f.api(t, "GET", "/messages/hello", ""); j["state"] != string(yidu.StateSent) {
		t.Errorf("registered message state %v", j["state"])
	}
}

// TestListPageStates: the list page shows notices not sent yet with their
// state's word, and sent messages as 已发送.
func TestListPageStates(t *testing.T) {
	f, _ := newCampaignFixture(t)
	at := f.clock.Now().Add(time.Hour).Format(time.RFC3339)
	if code, j := f.api(t, "POST", "/messages", `{"msgid":"page-sched","app":"hr","title":"排期通知","audience":{"userids":["alice"]},"send":true,"send_at":"`+at+`"}`); code != 201 {
		t.Fatalf("schedule: %d %v", code, j)
	}
	if code, j := f.api(t, "POST", "/messages", `{"msgid":"page-draft","app":"hr","title":"草稿通知","audience":{"all":true},"draft":true}`); code != 201 {
		t.Fatalf("draft: %d %v", code, j)
	}
	cookie, _ := f.login(t)
	req := httptest.NewRequest("GET", "/", nil)
	req.AddCookie(cookie)
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, req)
	page := w.Body.String()
	for _, want := range []string{`data-msgid="page-sched" data-state="scheduled"`, "待发送", `data-state="draft"`, "草稿", "已发送"} {
		if !strings.Contains(page, want) {
			t.Errorf("list page lacks %q", want)
		}
	}
}

// TestStateBadge: the badge is the state's word in the page's language,
// with the minutes late for a late send; an unknown state shows as itself.
func TestStateBadge(t *testing.T) {
	cats, err := loadCatalogues()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		lang  string
		state string
		late  int64
		want  string
	}{
		{"zh-CN", "scheduled", 0, "待发送"}, {"zh-CN", "sending", 0, "发送中"}, {"zh-CN", "sent", 30, "已发送"},
		{"zh-CN", "sent", 300, "已发送 · 延迟发送 (5 分钟)"}, {"zh-CN", "cancelled", 0, "已取消"},
		{"zh-CN", "failed", 0, "发送失败"}, {"zh-CN", "draft", 0, "草稿"}, {"zh-CN", "held", 0, "待处理"},
		{"zh-CN", "scheduled", 600, "待发送"}, {"zh-CN", "mystery", 0, "mystery"},
		{"en", "sent", 300, "Sent · sent 5 min late"}, {"en", "held", 0, "Held"}, {"en", "draft", 0, "Draft"},
	} {
		if got := stateBadge(cats[tc.lang], tc.state, tc.late); got != tc.want {
			t.Errorf("%s %s late %d: %q, want %q", tc.lang, tc.state, tc.late, got, tc.want)
		}
	}
}

// FuzzPatchBody: any PATCH body is decoded or refused as a bad parameter
// or invalid input (400), never a panic or another error.
func FuzzPatchBody(f *testing.F) {
	f.Add(`{"title":"x"}`)
	f.Add(`{"send_at":"2026-12-03T09:00:00+08:00","draft":false,"audience":{"userids":["a"]}}`)
	f.Add(`{"nope":1}`)
	f.Fuzz(func(t *testing.T, body string) {
		var b patchBody
		if err := decodeStrict(strings.NewReader(body), &b); err != nil && !errors.Is(err, errBadParam) && !errors.Is(err, yidu.ErrInvalid) {
			t.Fatalf("decode %q: %v", body, err)
		}
	})
}

// TestScheduleTags: a scheduled notice or a draft addressed to tags keeps
// them (POST, GET, PATCH), and a tag that reaches nobody is refused with
// the field named and nothing written.
func TestScheduleTags(t *testing.T) {
	f, st := newCampaignFixture(t)
	at := f.clock.Now().Add(time.Hour).Format(time.RFC3339)
	tagsOf := func(j map[string]any) []any {
		au, _ := j["audience"].(map[string]any)
		tags, _ := au["tags"].([]any)
		return tags
	}
	code, j := f.api(t, "POST", "/messages", `{"msgid":"tag-sched","app":"hr","title":"安全培训","audience":{"tags":[5],"userids":["ghost"]},"send":true,"send_at":"`+at+`"}`)
	if code != 201 || len(tagsOf(j)) != 1 || tagsOf(j)[0].(float64) != 5 {
		t.Fatalf("schedule to a tag: %d %v", code, j)
	}
	code, j = f.api(t, "POST", "/messages", `{"msgid":"tag-draft","app":"hr","title":"草稿","audience":{"departments":[2]},"draft":true}`)
	if code != 201 || tagsOf(j) == nil || len(tagsOf(j)) != 0 {
		t.Fatalf("draft: %d %v; want tags []", code, j)
	}
	if code, j = f.api(t, "PATCH", "/messages/tag-draft", `{"audience":{"tags":[5]}}`); code != 200 || len(tagsOf(j)) != 1 {
		t.Fatalf("patch to a tag: %d %v", code, j)
	}
	if code, j = f.api(t, "GET", "/messages/tag-draft", ""); code != 200 || len(tagsOf(j)) != 1 || tagsOf(j)[0].(float64) != 5 {
		t.Fatalf("get: %d %v", code, j)
	}
	for _, c := range []struct{ method, target, body string }{
		{"POST", "/messages", `{"app":"hr","title":"t","audience":{"tags":[99]},"send":true,"send_at":"` + at + `"}`},
		{"PATCH", "/messages/tag-draft", `{"audience":{"tags":[99],"userids":["ghost"]}}`},
	} {
		if code, j := f.api(t, c.method, c.target, c.body); code != 400 || j["field"] != "audience" {
			t.Errorf("%s %s: %d %v; want 400 field audience", c.method, c.target, code, j)
		}
	}
	if ns, _, _ := st.List(t.Context(), nil, "", "", "", 50, nil); len(ns) != 2 {
		t.Errorf("%d notices stored, want 2", len(ns))
	}
	if n, _ := st.Get(t.Context(), nil, "tag-draft"); !slices.Equal(n.Audience.Tags, []int64{5}) {
		t.Errorf("draft's tags after a refused patch: %v; want [5]", n.Audience.Tags)
	}
}

// heldRegistrar is a Registrar for a Runner whose notices are only held
// in these tests: a registration is a test failure.
type heldRegistrar struct{ tb testing.TB }

func (h heldRegistrar) RegisterAndSend(context.Context, yidu.Registration) (yidu.Registered, error) {
	h.tb.Errorf("a held notice was registered")
	return yidu.Registered{}, errors.New("not in this test")
}

// TestHeldNotice (issue 29, 2): a notice more than max_lateness past its
// send_at is held; the API and the list page say why, the page offers
// send and cancel for it (cancel only for a scheduled one), and a send by
// hand makes it due again.
func TestHeldNotice(t *testing.T) {
	f, st := newCampaignFixture(t)
	at := f.clock.Now().Add(time.Hour).Format(time.RFC3339)
	for _, id := range []string{"late-held", "late-cancel"} {
		if code, j := f.api(t, "POST", "/messages", `{"msgid":"`+id+`","app":"hr","title":"停电通知","audience":{"userids":["alice"]},"send":true,"send_at":"`+at+`"}`); code != 201 {
			t.Fatalf("schedule %s: %d %v", id, code, j)
		}
	}
	at2 := f.clock.Now().Add(5 * time.Hour).Format(time.RFC3339)
	if code, j := f.api(t, "POST", "/messages", `{"msgid":"later","app":"hr","title":"排期通知","audience":{"userids":["alice"]},"send":true,"send_at":"`+at2+`"}`); code != 201 {
		t.Fatalf("schedule later: %d %v", code, j)
	}
	// yidu was down from before the send_at until 3 h 10 min after it.
	f.clock.Add(4*time.Hour + 10*time.Minute)
	r, err := loops.NewRunner(st, heldRegistrar{t}, loops.RunnerOptions{MaxLateness: 2 * time.Hour})
	testenv.Check(t, "NewRunner", err)
	if n, err := r.Tick(t.Context()); err != nil || n != 0 {
		t.Fatalf("Tick: %d claimed, %v; want 0 (held)", n, err)
	}
	want := loops.HeldReason(190, 2*time.Hour)
	code, j := f.api(t, "GET", "/messages/late-held", "")
	if code != 200 || j["state"] != "held" || j["state_reason"] != want {
		t.Fatalf("held notice: %d %v; want state held, state_reason %q", code, j, want)
	}
	if !strings.Contains(want, "190 minutes late") || !strings.Contains(want, "max_lateness (120 minutes)") {
		t.Errorf("reason %q does not say how late and the bound", want)
	}

	cookie, _ := f.login(t)
	req := httptest.NewRequest("GET", "/", nil)
	req.AddCookie(cookie)
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, req)
	page := w.Body.String()
	row := func(id string) string {
		i := strings.Index(page, `data-msgid="`+id+`"`)
		if i < 0 {
			t.Fatalf("list page has no row %s", id)
		}
		end := strings.Index(page[i:], "</li>")
		return page[i : i+end]
	}
	held := row("late-held")
	for _, s := range []string{`data-state="held"`, "待处理", want, `class="held-why"`, `class="notice-send"`, `class="notice-cancel"`} {
		if !strings.Contains(held, s) {
			t.Errorf("held row lacks %q:\n%s", s, held)
		}
	}
	later := row("later")
	if !strings.Contains(later, `class="notice-cancel"`) || strings.Contains(later, `class="notice-send"`) || strings.Contains(later, "held-why") {
		t.Errorf("scheduled row: want cancel only, no send, no held text:\n%s", later)
	}

	// The page's buttons call these: send now makes it due (never held
	// again), cancel ends the other.
	if code, j = f.api(t, "POST", "/messages/late-held/send", ""); code != 202 || j["state"] != "scheduled" || j["state_reason"] != "" {
		t.Errorf("send held: %d %v", code, j)
	}
	if code, j = f.api(t, "POST", "/messages/late-cancel/cancel", ""); code != 200 || j["state"] != "cancelled" {
		t.Errorf("cancel held: %d %v", code, j)
	}
}
