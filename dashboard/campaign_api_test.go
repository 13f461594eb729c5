package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/internal/testenv"
)

// known is the fixture directory's UserIDs for campaign's check.
type knownIDs map[string]bool

func (k knownIDs) Known(_ context.Context, _ string, ids []string) (map[string]uint32, error) {
	out := map[string]uint32{}
	for i, id := range ids {
		if k[id] {
			out[id] = uint32(i + 1)
		}
	}
	return out, nil
}

// newCampaignFixture is the fixture with a real campaign.Store on a fresh
// MariaDB database, on the fixture's clock.
func newCampaignFixture(tb testing.TB) (*fixture, *campaign.Store) {
	tb.Helper()
	var st *campaign.Store
	f := newFixtureOpts(tb, false, func(o *Options) {
		s, err := campaign.NewStore(testenv.MySQL(tb), campaign.Options{Known: knownIDs{"alice": true, "zhangsan": true, "lisi": true},
			Apps: o.Apps, Now: o.Now})
		testenv.Check(tb, "campaign.NewStore", err)
		st, o.Campaigns = s, s
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
	if ns, _, _ := st.List(t.Context(), nil, "", "", "", 50); len(ns) != 2 {
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
// (400), never a panic or another error.
func FuzzPatchBody(f *testing.F) {
	f.Add(`{"title":"x"}`)
	f.Add(`{"send_at":"2026-12-03T09:00:00+08:00","draft":false,"audience":{"userids":["a"]}}`)
	f.Add(`{"nope":1}`)
	f.Fuzz(func(t *testing.T, body string) {
		var b patchBody
		if err := decodeStrict(strings.NewReader(body), &b); err != nil && !errors.Is(err, errBadParam) {
			t.Fatalf("decode %q: %v", body, err)
		}
		_ = fieldOf(body)
	})
}
