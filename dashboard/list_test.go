package dashboard

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
)

// listFixture adds four messages to the fixture's hello ("Holiday notice
// 放假通知", app hr): titles and apps to search, and send reports to show.
func listFixture(t *testing.T) *fixture {
	f := newFixture(t)
	for i, m := range []yidu.Message{
		{MsgID: "holiday", App: "hr", Title: "Holiday policy 假期"},
		{MsgID: "rota", App: "ops", Title: "holiday ROTA"},
		{MsgID: "pct", App: "hr", Title: "Attendance 100% done"},
		{MsgID: "items", App: "hr", Title: "1000 items"},
	} {
		m.CorpID, m.SentAt, m.Recipients = "acme", t0.Add(time.Duration(i+1)*time.Minute), 2
		added := f.add(t, seeded{m: m, rec: []uint32{1, 2}, read: []uint32{1}})
		switch m.MsgID {
		case "holiday":
			f.sends(t, added, yidu.BatchOutcome{Batch: 0, Status: yidu.SendSent, Users: 1, At: t0}, yidu.BatchOutcome{Batch: 1, Status: yidu.SendRefused, Users: 1, At: t0},
				yidu.BatchOutcome{Batch: 2, Status: yidu.SendUnknown, Users: 1, At: t0}, yidu.BatchOutcome{Batch: 3, Status: yidu.SendSent, Users: 1, At: t0, Reminder: true})
		case "rota":
			f.sends(t, added, yidu.BatchOutcome{Batch: 0, Status: yidu.SendSent, Users: 2, At: t0})
		}
	}
	return f
}

func TestListSearch(t *testing.T) {
	f := listFixture(t)
	tests := []struct {
		name, query string
		want        []string
	}{
		{"everything, newest first", "", []string{"items", "pct", "rota", "holiday", "hello"}},
		{"title in any case", "q=HOLIDAY", []string{"rota", "holiday", "hello"}},
		{"chinese", "q=" + url.QueryEscape("假期"), []string{"holiday"}},
		{"percent is literal", "q=" + url.QueryEscape("100%"), []string{"pct"}},
		{"app", "app=ops", []string{"rota"}},
		{"title and app", "q=holiday&app=hr", []string{"holiday", "hello"}},
		{"no match", "q=nothing", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			cursor := ""
			for range 10 {
				l := decode[listJSON](t, f.ok(t, "GET", "/api/v1/messages?limit=1&"+tt.query+"&cursor="+url.QueryEscape(cursor)))
				for _, m := range l.Messages {
					got = append(got, m.MsgID)
				}
				if cursor = l.NextCursor; cursor == "" {
					break
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("GET /messages?%s = %v; want %v", tt.query, got, tt.want)
			}
		})
	}
	for _, q := range []string{"q=" + strings.Repeat("x", maxTitleSearch+1), "q=%00", "app=a%20b", "app=" + strings.Repeat("a", 65)} {
		if w := f.do(t, "GET", "/api/v1/messages?"+q, acmeToken, nil); w.Code != http.StatusBadRequest {
			t.Errorf("list ?%.40s = %d; want 400", q, w.Code)
		}
	}
}

// TestListPage checks the list page HR uses: the search form keeps what
// was searched, the apps to filter by, each row's send outcome in batches,
// and the next page keeps the search.
func TestListPage(t *testing.T) {
	f := listFixture(t)
	c, _ := f.login(t)
	page := func(target string) string {
		t.Helper()
		w := f.page(c, target)
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s = %d: %s", target, w.Code, w.Body)
		}
		return w.Body.String()
	}
	body := page("/?q=policy")
	for _, want := range []string{
		`value="policy"`, `<option value="hr">hr</option>`,
		`href="/m/holiday"`,
		`<b class="send-result">部分发送</b> · 批次: 已送达 <span class="batches-sent">1</span> · 被拒 <span class="batches-refused">1</span> · 未知 <span class="batches-unknown">1</span>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("list page ?q=policy lacks %s", want)
		}
	}
	if strings.Contains(body, `href="/m/rota"`) || strings.Contains(body, `href="/m/hello"`) {
		t.Error("list page ?q=policy shows messages without policy in their title")
	}
	body = page("/?app=ops")
	if !strings.Contains(body, `href="/m/rota"`) || strings.Contains(body, `href="/m/holiday"`) ||
		!strings.Contains(body, `<b class="send-result">已发送</b> · 批次: 已送达 <span class="batches-sent">1</span></div>`) {
		t.Error("list page ?app=ops: want only ops's message, sent in one batch")
	}
	if body := page("/?app=hr"); !strings.Contains(body, `<option value="hr" selected>`) {
		t.Error("list page ?app=hr: want hr selected")
	}
	if body := page("/?q=nothing"); !strings.Contains(body, "无匹配通知") {
		t.Error("list page with no match: want it said")
	}
}

// TestStatusLine checks SetStatus: its line is on every page, escaped, and
// gone once it says nothing or is removed.
func TestStatusLine(t *testing.T) {
	f := listFixture(t)
	c, _ := f.login(t)
	page := func(target string) string { return f.page(c, target).Body.String() }
	status := "Demo: syncing <the directory>…"
	f.srv.SetStatus(func() string { return status })
	for _, p := range []string{"/", "/m/hello"} {
		if body := page(p); !strings.Contains(body, `<p class="status-line" id="status-line" role="status">Demo: syncing &lt;the directory&gt;…</p>`) {
			t.Errorf("%s lacks the escaped status line", p)
		}
	}
	status = ""
	if strings.Contains(page("/"), "status-line") {
		t.Error("an empty status still shows a line")
	}
	status = "again"
	f.srv.SetStatus(nil)
	if strings.Contains(page("/"), "status-line") {
		t.Error("SetStatus(nil) left the line")
	}
}
