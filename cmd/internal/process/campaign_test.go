package process

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/wecom"
)

const campaignSecret = "campaign-app-secret"

// campaignCorp: 1 公司 > 2 研发, 1 > 3 销售; zhangsan (1), lisi and wangwu
// (2), mallory (3); tag 7 安全员 is mallory and department 2, so lisi,
// wangwu and mallory; tag 9 is empty. without drops those UserIDs (they
// left the corp).
func campaignCorp(without ...string) fakewecom.Corp {
	c := fakewecom.Corp{
		CorpID: testCorp, Apps: []fakewecom.App{{AgentID: testAgent, Secret: campaignSecret}},
		Departments: []fakewecom.Department{{ID: 1, Name: "公司"}, {ID: 2, ParentID: 1, Name: "研发"}, {ID: 3, ParentID: 1, Name: "销售"}},
		Tags:        []fakewecom.Tag{{ID: 7, Name: "安全员", UserIDs: []string{"mallory"}, Departments: []int{2}}, {ID: 9, Name: "空"}},
	}
	for _, u := range []fakewecom.User{{UserID: "zhangsan", Name: "张三", Departments: []int{1}},
		{UserID: "lisi", Name: "李四", Departments: []int{2}}, {UserID: "wangwu", Name: "王五", Departments: []int{2}},
		{UserID: "mallory", Name: "Mallory", Departments: []int{3}}} {
		if !slices.Contains(without, u.UserID) {
			c.Users = append(c.Users, u)
		}
	}
	return c
}

// mustRunCampaign runs yidu against a fake WeCom holding campaignCorp and
// syncs the directory (tags included) as `yidu directory sync` does.
func mustRunCampaign(t *testing.T) (*Main, *fakewecom.Server, func()) {
	t.Helper()
	fake := fakewecom.New(campaignCorp())
	base := fakewecom.Start(t, fake)
	m := mustRunMainWith(t, func(c *config.Config) {
		c.WeCom.APIBase = base
		c.Apps[0].Secret = campaignSecret
	})
	dir, err := wecom.NewDirectory(wecom.App{CorpID: testCorp, AgentID: testAgent, Secret: campaignSecret}, wecom.DirectoryOptions{})
	testenv.Check(t, "NewDirectory", err)
	s, err := idmap.NewSyncer(m.Mapper, map[string]idmap.Directory{testCorp: dir}, idmap.Options{Registerer: prometheus.NewRegistry()})
	testenv.Check(t, "NewSyncer", err)
	sync := func() {
		t.Helper()
		if _, err := s.Sync(context.Background(), testCorp); err != nil {
			t.Fatalf("directory sync: %v", err)
		}
	}
	sync()
	return m, fake, sync
}

// apiRaw sends body (raw bytes) with contentType and returns the status
// and the decoded JSON answer.
func apiRaw(tb testing.TB, m *Main, method, path, contentType string, body []byte) (int, map[string]any) {
	tb.Helper()
	req, _ := http.NewRequest(method, "http://"+m.DashboardAddr+"/api/v1"+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+apiToken)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out
}

// TestScheduledTagNotice (issue 29, 3): a notice scheduled to a tag fires
// to exactly the tag's members at send time (its users and its
// department's subtree), a member who left after it was scheduled
// excluded, and its recipients equal the audience preview's count just
// before it fires.
func TestScheduledTagNotice(t *testing.T) {
	m, fake, sync := mustRunCampaign(t)
	audience := map[string]any{"tags": []int{7}, "userids": []string{"ghost"}}
	at := time.Now().Add(3 * time.Second).UTC()
	var created struct {
		State    string `json:"state"`
		Audience struct {
			Tags []int64 `json:"tags"`
		} `json:"audience"`
	}
	if code := api(t, m, "POST", "/messages", map[string]any{"msgid": "tag-notice", "app": "hr", "title": "安全培训",
		"audience": audience, "send": true, "send_at": at.Format(time.RFC3339Nano)}, &created); code != http.StatusCreated {
		t.Fatalf("schedule = %d; want 201", code)
	}
	if created.State != "scheduled" || !slices.Equal(created.Audience.Tags, []int64{7}) {
		t.Fatalf("scheduled = %+v; want state scheduled, tags [7]", created)
	}
	// wangwu leaves before it fires.
	fake.SetCorp(campaignCorp("wangwu"))
	sync()
	var preview struct {
		Recipients int      `json:"recipients"`
		Unknown    []string `json:"unknown_userids"`
	}
	if code := api(t, m, "POST", "/audience/preview", map[string]any{"app": "hr", "audience": audience}, &preview); code != http.StatusOK {
		t.Fatalf("preview = %d", code)
	}
	if preview.Recipients != 2 || !slices.Equal(preview.Unknown, []string{"ghost"}) {
		t.Fatalf("preview = %+v; want 2 recipients, ghost unknown", preview)
	}
	var got struct {
		State      string `json:"state"`
		Recipients int    `json:"recipients"`
		SentLateBy int    `json:"sent_late_by"`
	}
	testenv.WaitFor(t, 20*time.Second, "the scheduled notice sent", func() bool {
		return api(t, m, "GET", "/messages/tag-notice", nil, &got) == http.StatusOK && got.State == "sent"
	})
	if got.Recipients != preview.Recipients {
		t.Errorf("recipients = %d; want the preview's %d", got.Recipients, preview.Recipients)
	}
	var to []string
	for _, s := range fake.Sent() {
		u, _ := s.Body["touser"].(string)
		to = append(to, strings.Split(u, "|")...)
	}
	slices.Sort(to)
	if want := []string{"lisi", "mallory"}; !slices.Equal(to, want) {
		t.Errorf("message/send touser = %v; want %v (the tag's members at send time, once each)", to, want)
	}
	if n := testenv.Column[int](t, m.DB, "SELECT COUNT(*) FROM message_read_record WHERE corp_id = ? AND msgid = 'tag-notice'", testCorp); n[0] != 2 {
		t.Errorf("%d recipient rows; want 2", n[0])
	}
}

// writes is a fingerprint of what a request could write: every campaigns
// and messages row (count and a checksum of their content) and the
// recipient rows.
func writes(tb testing.TB, m *Main) string {
	tb.Helper()
	c := testenv.Column[string](tb, m.DB, `SELECT CONCAT_WS(' ',
		(SELECT COUNT(*) FROM campaigns),
		(SELECT COALESCE(SUM(CRC32(CONCAT_WS('|', msgid, title, body, url, audience, state, COALESCE(send_at, ''), updated_at))), 0) FROM campaigns),
		(SELECT COUNT(*) FROM messages),
		(SELECT COALESCE(SUM(CRC32(CONCAT_WS('|', msgid, title, state))), 0) FROM messages),
		(SELECT COUNT(*) FROM message_read_record))`)
	return c[0]
}

// TestComposeHostileInput (issue 29, 5): each bad input the compose page
// can send is answered with a clear error naming its field, and writes
// nothing (campaigns, messages and recipient rows unchanged).
func TestComposeHostileInput(t *testing.T) {
	m, _, _ := mustRunCampaign(t)
	now := time.Now().UTC()
	soon := now.Add(time.Hour).Format(time.RFC3339)
	// A scheduled notice that another replica is sending (claimed, lease
	// held), a draft, and a message sent now.
	for _, b := range []map[string]any{
		{"msgid": "being-sent", "app": "hr", "title": "t", "audience": map[string]any{"userids": []string{"lisi"}}, "send": true, "send_at": soon},
		{"msgid": "draft", "app": "hr", "title": "t", "audience": map[string]any{"tags": []int{7}}, "draft": true},
		{"msgid": "sent-now", "app": "hr", "title": "t", "audience": map[string]any{"userids": []string{"lisi"}}, "send": true},
	} {
		if code := api(t, m, "POST", "/messages", b, nil); code != http.StatusCreated {
			t.Fatalf("setup %v = %d", b["msgid"], code)
		}
	}
	if _, err := m.DB.Exec(`UPDATE campaigns SET state = 'sending', owner = 'other-replica', lease_until = ?, started_at = ?
		WHERE msgid = 'being-sent'`, now.Add(time.Hour), now); err != nil {
		t.Fatal(err)
	}
	var million strings.Builder
	for i := range 1_000_000 {
		fmt.Fprintf(&million, "u%d\n", i)
	}
	ids := strings.Fields(million.String())
	schedule := func(edit func(b map[string]any)) []byte {
		b := map[string]any{"app": "hr", "title": "新考勤制度", "audience": map[string]any{"userids": []string{"lisi"}}, "send": true, "send_at": soon}
		edit(b)
		out, _ := json.Marshal(b)
		return out
	}
	const js = "application/json"
	tests := []struct {
		name, method, path, contentType string
		body                            []byte
		code                            int
		field                           string
	}{
		{"title over the card", "POST", "/messages", js, schedule(func(b map[string]any) { b["title"] = strings.Repeat("长", 37) }), 400, "title"},
		{"title over the card, sent now", "POST", "/messages", js, schedule(func(b map[string]any) { b["title"] = strings.Repeat("长", 37); delete(b, "send_at") }), 400, "title"},
		{"empty audience", "POST", "/messages", js, schedule(func(b map[string]any) { b["audience"] = map[string]any{} }), 400, "audience"},
		{"empty audience, draft", "POST", "/messages", js, schedule(func(b map[string]any) {
			b["audience"] = map[string]any{}
			b["draft"] = true
			delete(b, "send_at")
		}), 400, "audience"},
		{"only unknown userids", "POST", "/messages", js, schedule(func(b map[string]any) { b["audience"] = map[string]any{"userids": []string{"ghost", "nobody"}} }), 400, "audience.userids"},
		{"only unknown userids, sent now", "POST", "/messages", js, schedule(func(b map[string]any) {
			b["audience"] = map[string]any{"userids": []string{"ghost", "nobody"}}
			delete(b, "send_at")
		}), 400, "audience.userids"},
		{"an empty tag", "POST", "/messages", js, schedule(func(b map[string]any) { b["audience"] = map[string]any{"tags": []int{9}} }), 400, "audience"},
		{"send_at in the past", "POST", "/messages", js, schedule(func(b map[string]any) { b["send_at"] = now.Add(-time.Minute).Format(time.RFC3339) }), 400, "send_at"},
		{"send_at over a year ahead", "POST", "/messages", js, schedule(func(b map[string]any) { b["send_at"] = now.AddDate(1, 0, 2).Format(time.RFC3339) }), 400, "send_at"},
		{"send_at not a time", "POST", "/messages", js, schedule(func(b map[string]any) { b["send_at"] = "tomorrow 9:00" }), 400, "send_at"},
		{"send_at not a time, patch", "PATCH", "/messages/draft", js, []byte(`{"send_at":"明天"}`), 400, "send_at"},
		{"a title that is a number", "POST", "/messages", js, schedule(func(b map[string]any) { b["title"] = 5 }), 400, "title"},
		{"userids that are not strings", "POST", "/messages", js, schedule(func(b map[string]any) { b["audience"] = map[string]any{"userids": []int{1}} }), 400, "audience.userids"},
		{"an empty audience, patch", "PATCH", "/messages/draft", js, []byte(`{"audience":{}}`), 400, "audience"},
		{"a patch to an empty tag", "PATCH", "/messages/draft", js, []byte(`{"audience":{"tags":[9]}}`), 400, "audience"},
		{"a title over the card, patch", "PATCH", "/messages/draft", js, []byte(`{"title":"` + strings.Repeat("长", 37) + `"}`), 400, "title"},
		{"a CSV that is not text", "POST", "/audience/parse-list?app=hr", "text/csv", []byte("userid\nlisi\n\x00\xff\xfe\x89PNG"), 400, "list"},
		{"a list that is an image", "POST", "/audience/parse-list?app=hr", "image/png", []byte("\x89PNG\r\n\x1a\n"), 400, "list"},
		{"1 million pasted ids", "POST", "/audience/parse-list?app=hr", "text/plain", []byte(million.String()), 400, "list"},
		{"1 million ids in the audience", "POST", "/messages", js, schedule(func(b map[string]any) { b["audience"] = map[string]any{"userids": ids} }), 413, "audience"},
		{"150,000 ids in the audience", "POST", "/messages", js, schedule(func(b map[string]any) { b["audience"] = map[string]any{"userids": ids[:150_000]} }), 400, "audience"},
		{"1 million ids in the preview", "POST", "/audience/preview", js, schedule(func(b map[string]any) {
			for k := range b {
				delete(b, k)
			}
			b["app"], b["audience"] = "hr", map[string]any{"userids": ids}
		}), 400, "audience"},
		{"an edit after sending began", "PATCH", "/messages/being-sent", js, []byte(`{"title":"改"}`), 409, "state"},
		{"an edit of a sent message", "PATCH", "/messages/sent-now", js, []byte(`{"title":"改"}`), 409, "state"},
		{"a cancel after sending began", "POST", "/messages/being-sent/cancel", "", nil, 409, "state"},
		{"a cancel of a sent message", "POST", "/messages/sent-now/cancel", "", nil, 409, "state"},
	}
	before := writes(t, m)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, j := apiRaw(t, m, tc.method, tc.path, tc.contentType, tc.body)
			msg, _ := j["error"].(string)
			if code != tc.code || j["field"] != tc.field || msg == "" {
				t.Errorf("%s %s = %d %v; want %d with field %q", tc.method, tc.path, code, j, tc.code, tc.field)
			}
			if after := writes(t, m); after != before {
				t.Errorf("wrote: %s -> %s", before, after)
			}
		})
	}
	// The notice being sent is still the other replica's, unchanged.
	if st := testenv.Column[string](t, m.DB, "SELECT CONCAT(state, ' ', owner, ' ', title) FROM campaigns WHERE msgid = 'being-sent'"); st[0] != "sending other-replica t" {
		t.Errorf("being-sent = %q", st[0])
	}
}
