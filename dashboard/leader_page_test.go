package dashboard

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/yidu-io/yidu/access"
)

// TestLeaderPage is what the leader's browser test found (issue 31): the
// message page and GET /messages/{msgid} of a department leader carry no
// send report (it counts the whole notice's people), the page hides what
// sends (撤回, 复制, 新建通知) from one who may not send, names its
// exports 我负责的人员, and says who is signed in by their name and
// UserID, not the session's key. An admin's page keeps all of it.
func TestLeaderPage(t *testing.T) {
	f, callers, _ := scopeFixture(t, true)
	f.sent(t, f.hello, t0) // one batch to 10 people: the whole notice's count
	leader := callers[1]
	admin, _ := f.login(t)

	hidden := func(body, id string) bool {
		m := regexp.MustCompile(`<[a-z]+ id="` + id + `"[^>]*>`).FindString(body)
		return m != "" && strings.Contains(m, " hidden")
	}
	tests := []struct {
		name                 string
		cookie               *http.Cookie
		wantSend, wantSender bool
		wantWho, wantExport  string
	}{
		{"leader of 4", leader.cookie, false, false, `<span class="who">李四 (lisi)</span>`, "我负责的人员"},
		{"admin", admin, true, true, `<span class="who">alice</span>`, "全部通知"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page := func(target string) string {
				t.Helper()
				r := f.page(tt.cookie, target)
				if r.Code != http.StatusOK {
					t.Fatalf("GET %s = %d", target, r.Code)
				}
				return r.Body.String()
			}
			body := page("/m/hello")
			if got := strings.Contains(body, `id="send-report"`); got != tt.wantSend {
				t.Errorf("send report on the page = %v; want %v", got, tt.wantSend)
			}
			for _, id := range []string{"recall", "duplicate"} {
				if got := hidden(body, id); got == tt.wantSender {
					t.Errorf("#%s hidden = %v; want %v", id, got, !tt.wantSender)
				}
			}
			if hidden(body, "remind") {
				t.Error("#remind hidden; a leader may remind their own unread people, an admin everyone")
			}
			if !strings.Contains(body, tt.wantWho) || strings.Contains(body, access.WeComUserPrefix) {
				t.Errorf("the page does not say %s, or shows the session key %s…", tt.wantWho, access.WeComUserPrefix)
			}
			if !strings.Contains(body, `id="export-scope"`) || !strings.Contains(body, tt.wantExport+"</span>") {
				t.Errorf("export scope is not %s", tt.wantExport)
			}
			if got := strings.Contains(page("/"), `id="new-notice"`); got != tt.wantSender {
				t.Errorf("新建通知 on the list = %v; want %v", got, tt.wantSender)
			}
			if tt.wantSender {
				if got := strings.Contains(page("/"), `class="send-outcome`); !got {
					t.Error("the list shows no send outcome to who may send")
				}
			} else if strings.Contains(page("/"), `class="send-outcome`) {
				t.Error("the list shows the leader the send outcome (the whole notice's batches)")
			}
			if w := f.page(tt.cookie, "/new"); tt.wantSender != (w.Code == http.StatusOK) || (!tt.wantSender && !strings.Contains(w.Body.String(), "您没有发送通知的权限")) {
				t.Errorf("GET /new = %d; want 200 for who may send, 403 您没有发送通知的权限 otherwise", w.Code)
			}
			r := f.browse(httptestGet("/api/v1/messages/hello"), tt.cookie, nil)
			var got struct {
				Recipients int             `json:"recipients"`
				Send       json.RawMessage `json:"send"`
			}
			if err := json.NewDecoder(r.Body).Decode(&got); err != nil || r.Code != http.StatusOK {
				t.Fatalf("GET /messages/hello = %d, %v", r.Code, err)
			}
			if has := len(got.Send) > 0 && string(got.Send) != "null"; has != tt.wantSend {
				t.Errorf("GET /messages/hello send = %s; want present %v (recipients %d)", got.Send, tt.wantSend, got.Recipients)
			}
		})
	}
}

func httptestGet(target string) *http.Request { return httptest.NewRequest("GET", target, nil) }
