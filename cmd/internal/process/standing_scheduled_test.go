package process

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestScheduledStandingNotice (issue 51): a standing notice is sent now
// or scheduled, never kept as a draft ("draft": true is a 400 at
// standing, nothing written), and an edit before its time cannot change
// its audience (立即发送 of an edited one sends it with its rule).
// Scheduled (send_at) to 研发, it is sent at
// its time to the department's members, none of them enrolled as a
// joiner; a member who joins 研发 afterwards is enrolled and sent its
// card within a poll, as for one sent now.
func TestScheduledStandingNotice(t *testing.T) {
	m, fake, sync := mustRunCampaign(t)
	post := func(id string) map[string]any {
		return map[string]any{"msgid": id, "app": "hr", "title": "考勤制度", "send": true,
			"audience": map[string]any{"departments": []int{2}}, "standing": map[string]any{"join_deadline": "7d"}}
	}
	draft := post("rules-draft")
	draft["draft"] = true
	if code, out := apiJSON(t, m, "POST", "/messages", draft); code != http.StatusBadRequest || out["field"] != "standing" {
		t.Errorf("a standing draft = %d %v; want 400 at standing", code, out)
	}
	if n := testenv.Column[int](t, m.DB, "SELECT (SELECT COUNT(*) FROM standing_notices WHERE msgid = 'rules-draft') + (SELECT COUNT(*) FROM campaigns WHERE msgid = 'rules-draft')")[0]; n != 0 {
		t.Errorf("a refused standing draft wrote %d rows", n)
	}

	// Until it is sent, an edit keeps it inside its rule: never another
	// audience (the rule enrols joiners by it). The compose page's 立即发送
	// of an edited notice (PATCH to a draft, then POST …/send) sends it,
	// its rule kept.
	held := post("rules-edit")
	held["send_at"] = time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
	if code, out := apiJSON(t, m, "POST", "/messages", held); code != http.StatusCreated {
		t.Fatalf("scheduled standing notice = %d %v; want 201", code, out)
	}
	other := map[string]any{"audience": map[string]any{"departments": []int{3}}}
	if code, out := apiJSON(t, m, "PATCH", "/messages/rules-edit", other); code != http.StatusBadRequest || out["field"] != "audience" {
		t.Errorf("PATCH to another audience = %d %v; want 400 at audience", code, out)
	}
	if code, out := apiJSON(t, m, "GET", "/messages/rules-edit", nil); code != http.StatusOK || out["state"] != "scheduled" {
		t.Errorf("after a refused edit = %d %v; want scheduled as posted", code, out["state"])
	}
	if code, out := apiJSON(t, m, "PATCH", "/messages/rules-edit", map[string]any{"title": "考勤制度（修订）", "draft": true,
		"audience": map[string]any{"departments": []int{2}}}); code != http.StatusOK {
		t.Fatalf("PATCH for 立即发送 = %d %v; want 200", code, out)
	}
	if code, out := apiJSON(t, m, "POST", "/messages/rules-edit/send", nil); code != http.StatusAccepted || out["state"] != "scheduled" {
		t.Fatalf("POST …/send = %d %v; want 202, due now", code, out)
	}
	testenv.WaitFor(t, 20*time.Second, "the edited standing notice sent", func() bool {
		code, out := apiJSON(t, m, "GET", "/messages/rules-edit", nil)
		return code == http.StatusOK && out["state"] == "sent"
	})
	if code, out := apiJSON(t, m, "GET", "/messages/rules-edit/standing", nil); code != http.StatusOK {
		t.Errorf("GET …/standing after 立即发送 = %d %v; want its rule", code, out)
	}

	const msg = "rules-later"
	later := post(msg)
	later["send_at"] = time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339Nano)
	var created struct {
		State string `json:"state"`
	}
	if code := api(t, m, "POST", "/messages", later, &created); code != http.StatusCreated || created.State != "scheduled" {
		t.Fatalf("scheduled standing notice = %d %+v; want 201, scheduled", code, created)
	}
	var got struct {
		State      string `json:"state"`
		Recipients int    `json:"recipients"`
	}
	testenv.WaitFor(t, 20*time.Second, "the scheduled standing notice sent", func() bool {
		return api(t, m, "GET", "/messages/"+msg, nil, &got) == http.StatusOK && got.State == "sent"
	})
	if got.Recipients != 2 {
		t.Errorf("recipients at its time = %d; want 研发's 2", got.Recipients)
	}
	enrolled := func() []string {
		return testenv.Column[string](t, m.DB, `SELECT u.userid FROM standing_enrolments e JOIN users u ON u.corp_id = e.corp_id AND u.uid = e.uid
			WHERE e.msgid = ? AND e.sent_at IS NOT NULL`, msg)
	}
	if e := enrolled(); len(e) != 0 {
		t.Errorf("enrolled at the send = %v; want none (the first recipients are not joiners)", e)
	}

	fake.AddUser(testCorp, fakewecom.User{UserID: "zhaoliu", Name: "赵六", Departments: []int{2}})
	sync()
	testenv.WaitFor(t, 15*time.Second, "the joiner enrolled and sent", func() bool { return len(enrolled()) == 1 })
	if e := enrolled(); e[0] != "zhaoliu" {
		t.Errorf("enrolled = %v; want [zhaoliu]", e)
	}
	cards := 0
	for _, s := range fake.Sent() {
		if raw := string(s.Raw); strings.Contains(raw, `"task_id":"`+msg+`@`) && strings.Contains(raw, "zhaoliu") {
			cards++
		}
	}
	if cards != 1 {
		t.Errorf("cards of %s to zhaoliu = %d; want 1", msg, cards)
	}
}
