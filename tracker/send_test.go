package tracker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/wecom"
)

// sentCards returns the cards the fake accepted for msgID, in order.
func sentCards(corpID, msgID string) []fakewecom.Sent {
	var out []fakewecom.Sent
	for _, s := range fake.Sent() {
		card, _ := s.Body["template_card"].(map[string]any)
		task, _ := card["task_id"].(string)
		if id, _ := yidu.ParseTaskID(task); s.CorpID == corpID && string(id) == msgID {
			out = append(out, s)
		}
	}
	return out
}

func taskID(s fakewecom.Sent) string {
	return s.Body["template_card"].(map[string]any)["task_id"].(string)
}

type sendRow struct {
	batch   int
	status  string
	errcode int
	invalid string
}

func (e *env) sends(tb testing.TB, msgID, kind string) []sendRow {
	tb.Helper()
	rows, err := e.db.Query("SELECT batch, status, errcode, COALESCE(invalid, '') FROM message_sends"+
		" WHERE corp_id = ? AND msgid = ? AND kind = ? ORDER BY batch, sent_at", e.app.CorpID, msgID, kind)
	testenv.Check(tb, "select sends", err)
	defer rows.Close()
	var out []sendRow
	for rows.Next() {
		var r sendRow
		testenv.Check(tb, "scan", rows.Scan(&r.batch, &r.status, &r.errcode, &r.invalid))
		out = append(out, r)
	}
	return out
}

func userIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("u%04d", i)
	}
	return ids
}

func TestSend2500(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	fake.SetCorp(fakewecom.Corp{CorpID: e.app.CorpID, Apps: []fakewecom.App{{AgentID: e.app.AgentID, Secret: e.secret}}, InvalidUsers: []string{"u0007", "u2001"}})
	reg := e.registration("send-2500", yidu.Audience{UserIDs: userIDs(2500)})
	reg.Send = true
	if _, created, err := e.reg.Register(ctx, reg); err != nil || !created {
		t.Fatalf("Register = %v, %v", err, created)
	}
	cards := sentCards(e.app.CorpID, "send-2500")
	if len(cards) != 3 {
		t.Fatalf("message/send calls = %d; want 3", len(cards))
	}
	var everyone []string
	wantInvalid := map[int]string{}
	for n, c := range cards {
		if got, want := taskID(c), fmt.Sprintf("send-2500@%d", n); got != want {
			t.Errorf("call %d task_id = %q; want %q", n, got, want)
		}
		users := strings.Split(c.Body["touser"].(string), "|")
		if want := []int{1000, 1000, 500}[n]; len(users) != want {
			t.Errorf("call %d has %d users; want %d", n, len(users), want)
		}
		everyone = append(everyone, users...)
		for _, u := range users {
			if u == "u0007" || u == "u2001" {
				wantInvalid[n] = strings.Trim(wantInvalid[n]+"|"+u, "|")
			}
		}
		card := c.Body["template_card"].(map[string]any)
		button := card["button_list"].([]any)[0].(map[string]any)
		if card["card_type"] != "button_interaction" || card["main_title"].(map[string]any)["title"] != reg.Title ||
			button["key"] != "read_ok" || button["text"] != readButtonText || c.Body["agentid"] != float64(e.app.AgentID) {
			t.Errorf("call %d body = %s", n, c.Raw)
		}
	}
	slices.Sort(everyone)
	if !slices.Equal(everyone, userIDs(2500)) {
		t.Errorf("the calls did not address each recipient exactly once")
	}
	rows := e.sends(t, "send-2500", kindSend)
	if len(rows) != 3 {
		t.Fatalf("message_sends rows = %+v; want 3", rows)
	}
	for n, r := range rows {
		if r.batch != n || r.status != statusSent || r.invalid != wantInvalid[n] {
			t.Errorf("message_sends[%d] = %+v; want sent with invalid %q", n, r, wantInvalid[n])
		}
	}

	// Registering (and sending) again sends nothing twice.
	if _, created, err := e.reg.Register(ctx, reg); err != nil || created {
		t.Fatalf("second Register = %v, %v", err, created)
	}
	if n := len(sentCards(e.app.CorpID, "send-2500")); n != 3 {
		t.Errorf("calls after re-registration = %d; want still 3", n)
	}
}

// hangUp closes the connection after reading the request: the card may
// have been delivered, the answer is lost.
func hangUp(w http.ResponseWriter, _ *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

func TestSendUnknownOutcomeNotResent(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var calls atomic.Int32
	faults.Store("unknown-1", fault(func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		calls.Add(1)
		if strings.Contains(string(body), `"unknown-1@1"`) {
			hangUp(w, r)
			return true
		}
		return false
	}))
	t.Cleanup(func() { faults.Delete("unknown-1") })
	reg := e.registration("unknown-1", yidu.Audience{UserIDs: userIDs(2500)})
	reg.Send = true
	if _, _, err := e.reg.Register(ctx, reg); err != nil {
		t.Fatalf("Register = %v; an unknown outcome is recorded, not an error", err)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("calls = %d; want 3 (the unknown batch is not retried)", n)
	}
	want := []sendRow{{0, statusSent, 0, ""}, {1, statusUnknown, 0, ""}, {2, statusSent, 0, ""}}
	if got := e.sends(t, "unknown-1", kindSend); !slices.Equal(got, want) {
		t.Errorf("message_sends = %+v; want %+v", got, want)
	}
	if _, _, err := e.reg.Register(ctx, reg); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("calls after re-registration = %d; want 3 (unknown batch never resent)", n)
	}
}

func TestSendRetriesRefusedBatches(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var refuse atomic.Int32 // answers 45009 while positive
	var calls atomic.Int32
	faults.Store("busy-1", fault(func(w http.ResponseWriter, _ *http.Request, _ []byte) bool {
		calls.Add(1)
		if refuse.Add(-1) >= 0 {
			fmt.Fprint(w, `{"errcode":45009,"errmsg":"api freq out of limit"}`)
			return true
		}
		return false
	}))
	t.Cleanup(func() { faults.Delete("busy-1") })
	reg := e.registration("busy-1", yidu.Audience{UserIDs: userIDs(10)})
	reg.Send = true

	// Refused more often than the retry allows (3 attempts): recorded as
	// refused, and a later attempt sends it.
	refuse.Store(5)
	if _, _, err := e.reg.Register(ctx, reg); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("attempts = %d; want 3", n)
	}
	if got := e.sends(t, "busy-1", kindSend); !slices.Equal(got, []sendRow{{0, statusRefused, 45009, ""}}) {
		t.Errorf("message_sends = %+v; want one refused row", got)
	}
	if _, _, err := e.reg.Register(ctx, reg); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 6 {
		t.Errorf("attempts = %d; want 6 (3, then two refused and one delivered)", n)
	}
	if got := e.sends(t, "busy-1", kindSend); len(got) != 2 || got[1].status != statusSent {
		t.Errorf("message_sends = %+v; want refused then sent", got)
	}
	if n := len(sentCards(e.app.CorpID, "busy-1")); n != 1 {
		t.Errorf("cards delivered = %d; want 1", n)
	}
}

// scripted is a Sender answering from a list.
type scripted struct {
	answers []func() (wecom.SendResult, error)
	calls   int
}

func (s *scripted) SendMessage(context.Context, string, int64, []byte) (wecom.SendResult, error) {
	s.calls++
	return s.answers[min(s.calls, len(s.answers))-1]()
}

func TestCallClassification(t *testing.T) {
	ok := func() (wecom.SendResult, error) { return wecom.SendResult{InvalidUsers: []string{"x"}}, nil }
	code := func(c int64) func() (wecom.SendResult, error) {
		return func() (wecom.SendResult, error) { return wecom.SendResult{ErrCode: c, ErrMsg: "no"}, nil }
	}
	notSent := func() (wecom.SendResult, error) {
		return wecom.SendResult{}, fmt.Errorf("%w: dial: refused", wecom.ErrNotSent)
	}
	lost := func() (wecom.SendResult, error) { return wecom.SendResult{}, errors.New("EOF after write") }
	tests := []struct {
		name    string
		answers []func() (wecom.SendResult, error)
		status  string
		calls   int
	}{
		{"ok", []func() (wecom.SendResult, error){ok}, statusSent, 1},
		{"busy then ok", []func() (wecom.SendResult, error){code(-1), code(45009), ok}, statusSent, 3},
		{"rate limited throughout", []func() (wecom.SendResult, error){code(45009)}, statusRefused, 3},
		{"stale token then ok", []func() (wecom.SendResult, error){code(42001), ok}, statusSent, 2},
		{"task id reused: not retried", []func() (wecom.SendResult, error){code(42014)}, statusRefused, 1},
		{"all users invalid: not retried", []func() (wecom.SendResult, error){code(81013)}, statusRefused, 1},
		{"not sent then ok", []func() (wecom.SendResult, error){notSent, ok}, statusSent, 2},
		{"never sent", []func() (wecom.SendResult, error){notSent}, statusUnsent, 3},
		{"lost answer: never retried", []func() (wecom.SendResult, error){lost, ok}, statusUnknown, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &scripted{answers: tt.answers}
			r := mustNew(t, nil, nil, nil, Options{Sender: s, Retry: Retry{Attempts: 3, Initial: time.Microsecond, Max: time.Microsecond}})
			status, _, _, _ := r.call(context.Background(), yidu.Message{}, nil)
			if status != tt.status || s.calls != tt.calls {
				t.Errorf("call = %s after %d calls; want %s after %d", status, s.calls, tt.status, tt.calls)
			}
		})
	}
}

func TestRemind(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	m, _, err := e.reg.Register(ctx, e.registration("remind-1", yidu.Audience{UserIDs: userIDs(1500)}))
	testenv.Check(t, "register", err)
	if _, ok, err := e.reg.LastReminder(ctx, e.app.CorpID, "remind-1"); ok || err != nil {
		t.Fatalf("LastReminder before any = %v, %v", ok, err)
	}
	rep, err := e.reg.Remind(ctx, m, userIDs(1200))
	if err != nil || rep.Reminded != 1200 || rep.Batches != 2 {
		t.Fatalf("Remind = %+v, %v; want 1200 reminded in 2 batches", rep, err)
	}
	rep, err = e.reg.Remind(ctx, m, []string{"u0003", "u0002", "u0003"})
	if err != nil || rep.Reminded != 2 {
		t.Fatalf("second Remind = %+v, %v", rep, err)
	}
	var tasks []string
	for _, c := range sentCards(e.app.CorpID, "remind-1") {
		tasks = append(tasks, taskID(c))
	}
	if want := []string{"remind-1@r1-0", "remind-1@r1-1", "remind-1@r2-0"}; !slices.Equal(tasks, want) {
		t.Errorf("reminder task_ids = %v; want %v", tasks, want)
	}
	at, ok, err := e.reg.LastReminder(ctx, e.app.CorpID, "remind-1")
	if err != nil || !ok || time.Since(at).Abs() > time.Minute {
		t.Errorf("LastReminder = %v, %v, %v; want about now", at, ok, err)
	}
	if rows := e.sends(t, "remind-1", kindRemind); len(rows) != 3 {
		t.Errorf("remind rows = %+v; want 3", rows)
	}
}

// TestRemindSkipsBadUserIDs: one member whose UserID breaks WeCom's rule
// is skipped and reported; the others are reminded.
func TestRemindSkipsBadUserIDs(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	m, _, err := e.reg.Register(ctx, e.registration("remind-bad", yidu.Audience{UserIDs: userIDs(3)}))
	testenv.Check(t, "register", err)
	rep, err := e.reg.Remind(ctx, m, []string{"u0001", "-dash", "bad id", "u0002"})
	if err != nil || rep.Reminded != 2 || rep.BadUserIDs != 2 || rep.Batches != 1 {
		t.Fatalf("Remind = %+v, %v; want 2 reminded, 2 bad userids, 1 batch", rep, err)
	}
	cards := sentCards(e.app.CorpID, "remind-bad")
	if len(cards) != 1 {
		t.Fatalf("cards sent = %d; want 1", len(cards))
	}
	if to, _ := cards[0].Body["touser"].(string); to != "u0001|u0002" {
		t.Errorf("touser = %q; want u0001|u0002", to)
	}
}

func TestNoticeRateLimit(t *testing.T) {
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	r := mustNew(t, nil, nil, nil, Options{Now: func() time.Time { return now }})
	for i := range noticesPerMinute {
		if !r.allowNotice("hr") {
			t.Fatalf("notice %d refused", i)
		}
	}
	if r.allowNotice("hr") {
		t.Error("notice 31 within a minute allowed")
	}
	if !r.allowNotice("finance") {
		t.Error("another app is limited by hr's notices")
	}
	sent := noticesPerMinute
	for sent < noticesPerHour {
		now = now.Add(time.Minute)
		for range noticesPerMinute {
			if sent < noticesPerHour && r.allowNotice("hr") {
				sent++
			}
		}
	}
	if r.allowNotice("hr") {
		t.Errorf("notice %d within an hour allowed", noticesPerHour+1)
	}
	now = now.Add(time.Hour)
	if !r.allowNotice("hr") {
		t.Error("notice refused an hour later")
	}
}
