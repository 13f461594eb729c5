package dashboard

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"
)

// TestRemindIntervalPerScope is issue 38 item 3 as a row of the attacker's
// table: a department leader reminding their own people must not lock
// HR out of "remind unread" for the interval. After the leader of 4
// reminds lisi (their only unread person), the admin still reminds the
// others (200) and not lisi again; the leader's second reminder within
// the interval is 429, and so is the admin's once nobody is left.
// Fails on the code before campaign.Service (the interval was the whole
// notice's: the admin got 429).
func TestRemindIntervalPerScope(t *testing.T) {
	f, callers, _ := scopeFixture(t, true)
	leader := callers[1]
	remind := func(c caller) *http.Response {
		t.Helper()
		return c.do(t, f, "POST", "/api/v1/messages/hello/remind", "{}").Result()
	}
	admin := caller{name: "admin token", token: adminToken}
	if r := remind(leader); r.StatusCode != http.StatusOK {
		t.Fatalf("the leader's reminder of their own people = %d, want 200", r.StatusCode)
	}
	f.clock.Add(time.Second) // message_sends keys a batch by its time
	r := remind(admin)
	if r.StatusCode != http.StatusOK {
		t.Fatalf("the admin's reminder after a leader's = %d, want 200 (a leader's reminder must not lock HR out)", r.StatusCode)
	}
	var rep remindJSON
	if err := json.NewDecoder(r.Body).Decode(&rep); err != nil || rep.Reminded == 0 {
		t.Errorf("the admin's reminder = %+v, %v; want the other unread people reminded", rep, err)
	}
	to := f.wecom.reminders()
	if len(to) != 2 || !slices.Equal(to[0], []string{"lisi"}) || slices.Contains(to[1], "lisi") || len(to[1]) == 0 {
		t.Errorf("reminders went to %v; want [lisi] then the others without lisi", to)
	}
	if r := remind(leader); r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Errorf("the leader's second reminder within the interval = %d (Retry-After %q), want 429 with Retry-After",
			r.StatusCode, r.Header.Get("Retry-After"))
	}
	r = remind(admin)
	var soon struct {
		NextAllowedAt string `json:"next_allowed_at"`
	}
	_ = json.NewDecoder(r.Body).Decode(&soon)
	if r.StatusCode != http.StatusTooManyRequests || soon.NextAllowedAt == "" {
		t.Errorf("the admin's reminder with everyone reminded = %d %+v, want 429 with next_allowed_at", r.StatusCode, soon)
	}
}
