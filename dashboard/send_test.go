package dashboard

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
)

// TestRegisterSendReport: POST /messages with body, url and send answers
// with the message and what sending did, batch by batch; a send that sent
// nothing says so.
func TestRegisterSendReport(t *testing.T) {
	f := newFixture(t)
	body := `{"msgid":"n1","app":"hr","title":"年会通知","body":"周五 18:00\n三楼","url":"https://intra.example.com/p/1","send":true,"audience":{"userids":["zhangsan","lisi"]}}`
	w := f.do(t, "POST", "/api/v1/messages", acmeToken, strings.NewReader(body))
	if w.Code != http.StatusCreated {
		t.Fatalf("register = %d: %s", w.Code, w.Body)
	}
	m := decode[messageJSON](t, w)
	if m.Body != "周五 18:00\n三楼" || m.URL != "https://intra.example.com/p/1" || m.Send == nil {
		t.Fatalf("registered = %+v", m)
	}
	if s := m.Send; s.Result != "sent" || s.Sent != 2 || len(s.Batches) != 1 || s.Batches[0].TaskID != "n1@0" || s.Batches[0].Status != "sent" || s.Batches[0].At == nil {
		t.Errorf("send report = %+v", s)
	}
	if got := decode[messageJSON](t, f.ok(t, "GET", "/api/v1/messages/n1")); got.Send == nil || got.Send.Result != "sent" {
		t.Errorf("GET n1 send = %+v; want the batches", got.Send)
	}
	if got := decode[messageJSON](t, f.ok(t, "GET", "/api/v1/messages/hello")); got.Send != nil || got.RecalledAt != nil {
		t.Errorf("GET hello = %+v; want no send report and not recalled", got)
	}
	if w := f.do(t, "POST", "/api/v1/messages", acmeToken, strings.NewReader(body)); w.Code != http.StatusOK {
		t.Errorf("same again = %d; want 200", w.Code)
	} else if s := decode[messageJSON](t, w).Send; s == nil || !s.Batches[0].Earlier {
		t.Errorf("same again: send = %+v; want the earlier batch", s)
	}
	other := strings.Replace(body, "三楼", "四楼", 1)
	if w := f.do(t, "POST", "/api/v1/messages", acmeToken, strings.NewReader(other)); w.Code != http.StatusConflict {
		t.Errorf("another body = %d; want 409", w.Code)
	}

	unreachable := `{"msgid":"n2","app":"hr","title":"unreachable WeCom","send":true,"audience":{"userids":["zhangsan"]}}`
	w = f.do(t, "POST", "/api/v1/messages", acmeToken, strings.NewReader(unreachable))
	if s := decode[messageJSON](t, w).Send; w.Code != http.StatusCreated || s == nil || s.Result != "failed" || s.Unsent != 1 || s.Batches[0].Status != "unsent" {
		t.Errorf("register with WeCom unreachable = %d %+v; want 201 saying nothing was sent", w.Code, s)
	}

	bad := []struct{ name, body, field string }{
		{"title too long for a card", `{"app":"hr","title":"` + strings.Repeat("题", yidu.MaxCardTitle+1) + `","send":true,"audience":{"all":true}}`, "title"},
		{"body too long", `{"app":"hr","title":"x","body":"` + strings.Repeat("文", yidu.MaxBody+1) + `","audience":{"all":true}}`, "body"},
		{"body not a string", `{"app":"hr","title":"x","body":1,"audience":{"all":true}}`, "body"},
		{"relative url", `{"app":"hr","title":"x","url":"/p/1","audience":{"all":true}}`, "url"},
		{"url too long", `{"app":"hr","title":"x","url":"https://x.example.com/` + strings.Repeat("a", yidu.MaxURL) + `","audience":{"all":true}}`, "url"},
	}
	for _, tc := range bad {
		w := f.do(t, "POST", "/api/v1/messages", acmeToken, strings.NewReader(tc.body))
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), tc.field) {
			t.Errorf("%s: = %d %s; want 400 naming %s", tc.name, w.Code, w.Body, tc.field)
		}
	}
	// A long title is fine without send (the card is not sent).
	long := `{"app":"hr","title":"` + strings.Repeat("题", yidu.MaxCardTitle+1) + `","audience":{"all":true}}`
	if w := f.do(t, "POST", "/api/v1/messages", acmeToken, strings.NewReader(long)); w.Code != http.StatusCreated {
		t.Errorf("long title without send = %d; want 201", w.Code)
	}
}

func TestRecall(t *testing.T) {
	f := newFixture(t)
	if w := f.do(t, "POST", "/api/v1/messages/hello/recall", acmeToken, nil); w.Code != http.StatusConflict {
		t.Errorf("recall of a message never sent = %d; want 409", w.Code)
	}
	f.sent(t, f.hello, t0)
	w := f.ok(t, "POST", "/api/v1/messages/hello/recall")
	got := decode[recallJSON](t, w)
	if got.RecalledAt == nil || !got.RecalledAt.Equal(f.clock.Now()) || got.Read != 4 || got.Recalled != 1 || len(got.Failed) != 0 {
		t.Fatalf("recall = %+v; want recalled now with 4 reads frozen", got)
	}

	// Reads after the recall move nothing on the dashboard.
	f.read(t, f.hello, yidu.SignalButton, f.clock.Now(), 2, 3, 5)
	m := decode[messageJSON](t, f.ok(t, "GET", "/api/v1/messages/hello"))
	if m.RecalledAt == nil || *m.Read != 4 || *m.Unread != 6 || m.Send == nil || !m.Send.Batches[0].Recalled {
		t.Errorf("GET after recall = %+v; want recalled, 4/10 frozen, batch recalled", m)
	}
	if l := decode[listJSON](t, f.ok(t, "GET", "/api/v1/messages")); *l.Messages[0].Read != 4 || l.Messages[0].RecalledAt == nil {
		t.Errorf("list after recall = %+v; want 4 frozen", l.Messages[0])
	}
	if p := decode[progressJSON](t, f.ok(t, "GET", "/api/v1/messages/hello/progress")); p.Read != 4 {
		t.Errorf("progress after recall read = %d; want 4", p.Read)
	}
	// Still exportable; never reminded again; recalling again is idempotent.
	f.ok(t, "GET", "/api/v1/messages/hello/export.csv")
	if w := f.do(t, "POST", "/api/v1/messages/hello/remind", acmeToken, nil); w.Code != http.StatusConflict {
		t.Errorf("remind after recall = %d; want 409", w.Code)
	}
	again := decode[recallJSON](t, f.ok(t, "POST", "/api/v1/messages/hello/recall"))
	if again.RecalledAt == nil || !again.RecalledAt.Equal(*got.RecalledAt) || again.Already != 1 || f.wecom.recalled() != 1 {
		t.Errorf("second recall = %+v (%d recalls); want the first one's time, no new recall", again, f.wecom.recalled())
	}

	t.Run("past WeCom's 24 h window", func(t *testing.T) {
		old := yidu.Message{CorpID: "acme", MsgID: "old", App: "hr", Title: "Old", SentAt: t0, Recipients: 1}
		old = f.add(t, seeded{m: old, rec: []uint32{1}})
		f.sent(t, old, f.clock.Now().Add(-25*time.Hour))
		w := f.do(t, "POST", "/api/v1/messages/old/recall", acmeToken, nil)
		if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "24 hours") {
			t.Errorf("recall after 25 h = %d %s; want 409 explaining the window", w.Code, w.Body)
		}
	})

	t.Run("the page shows the recall and the send report", func(t *testing.T) {
		c, _ := f.login(t)
		page := f.page(c, "/m/hello").Body.String()
		for _, want := range []string{`id="recalled"`, `id="send-report"`, `id="send-batches"`, "hello@0", `id="recall" type="button" class="danger" disabled`, `id="remind" type="button" disabled`} {
			if !strings.Contains(page, want) {
				t.Errorf("page lacks %s", want)
			}
		}
		list := httptest.NewRequest("GET", "/", nil)
		list.AddCookie(c)
		w = httptest.NewRecorder()
		f.h.ServeHTTP(w, list)
		if !strings.Contains(w.Body.String(), "已撤回") {
			t.Error("list page does not mark the recalled message")
		}
	})
}

// TestRecallCSRF: Recall is behind the same sign-in and CSRF as Remind.
func TestRecallCSRF(t *testing.T) {
	f := newFixture(t)
	f.sent(t, f.hello, t0)
	c, tok := f.login(t)
	post := func(hdr map[string]string) int {
		return f.browse(httptest.NewRequest("POST", "/api/v1/messages/hello/recall", nil), c, hdr).Code
	}
	tests := []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"without token", nil, http.StatusForbidden},
		{"wrong token", map[string]string{csrfHeader: tok + "x"}, http.StatusForbidden},
		{"cross-site with token", map[string]string{csrfHeader: tok, "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"with token", map[string]string{csrfHeader: tok, "Sec-Fetch-Site": "same-origin"}, http.StatusOK},
	}
	for _, tc := range tests {
		if got := post(tc.hdr); got != tc.want {
			t.Errorf("%s: = %d; want %d", tc.name, got, tc.want)
		}
	}
	if w := f.do(t, "POST", "/api/v1/messages/hello/recall", otherToken, nil); w.Code != http.StatusNotFound {
		t.Errorf("recall by another corp = %d; want 404", w.Code)
	}
}
