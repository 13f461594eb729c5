package tracker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
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

// row is what a test checks of a message_sends row.
type row struct {
	batch   int
	status  string
	errcode int
	invalid string
	resent  bool
	msgid   bool // a WeCom msgid was stored
}

func (e *env) sends(tb testing.TB, msgID, kind string) []row {
	tb.Helper()
	rows, err := e.db.Query("SELECT batch, status, errcode, COALESCE(invalid, ''), resent, wecom_msgid IS NOT NULL FROM message_sends"+
		" WHERE corp_id = ? AND msgid = ? AND kind = ? ORDER BY batch, sent_at", e.app.CorpID, msgID, kind)
	testenv.Check(tb, "select sends", err)
	defer rows.Close()
	var out []row
	for rows.Next() {
		var r row
		testenv.Check(tb, "scan", rows.Scan(&r.batch, &r.status, &r.errcode, &r.invalid, &r.resent, &r.msgid))
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
	reg := e.sendRegistration("send-2500", 2500)
	res, err := e.reg.RegisterAndSend(ctx, reg)
	created, rep := res.Created, res.Send
	if err != nil || !created {
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
			button["key"] != "read_ok" || button["text"] != readButtonText || c.Body["agentid"] != float64(e.app.AgentID) ||
			c.Body["enable_duplicate_check"] != 1.0 || c.Body["duplicate_check_interval"] != 14400.0 {
			t.Errorf("call %d body = %s", n, c.Raw)
		}
		if _, ok := card["card_action"]; ok {
			t.Errorf("call %d has a card_action without a url: %s", n, c.Raw)
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
		if r.batch != n || r.status != statusSent || r.invalid != wantInvalid[n] || !r.msgid {
			t.Errorf("message_sends[%d] = %+v; want sent with invalid %q and a WeCom msgid", n, r, wantInvalid[n])
		}
	}
	if rep.Sent != 2498 || rep.Invalid != 2 || len(rep.Outcomes) != 3 || rep.Outcomes[2].Users != 500 || rep.Outcomes[0].Status != yidu.SendSent {
		t.Errorf("report = %+v", rep)
	}

	// Registering (and sending) again sends nothing twice, and reports
	// what the first send did.
	res, err = e.reg.RegisterAndSend(ctx, reg)
	created, rep = res.Created, res.Send
	if err != nil || created {
		t.Fatalf("second Register = %v, %v", err, created)
	}
	if n := len(sentCards(e.app.CorpID, "send-2500")); n != 3 {
		t.Errorf("calls after re-registration = %d; want still 3", n)
	}
	if rep.Skipped != 3 || len(rep.Outcomes) != 3 || !rep.Outcomes[1].Earlier || rep.Outcomes[1].Status != yidu.SendSent || rep.Outcomes[1].Users != 1000 {
		t.Errorf("report of the second send = %+v", rep)
	}
	outs, err := e.reg.SendOutcomes(ctx, e.app.CorpID, "send-2500")
	if err != nil || len(outs) != 3 || outs[0].Invalid != 1 || outs[2].Status != yidu.SendSent {
		t.Errorf("SendOutcomes = %+v, %v", outs, err)
	}
}

// TestSendCard: the body is the card's sub_title_text; the url is its
// card_action, through the tracked link when there is one.
func TestSendCard(t *testing.T) {
	const doc = "https://intranet.example.com/p/42?x=1"
	tests := []struct {
		name  string
		links LinkFunc
		want  string
	}{
		{"tracked link", func(app yidu.App, msgID, target string) (string, error) {
			return "https://yidu.example.com/r/" + app.Name + "/" + msgID + "?to=" + target, nil
		}, "https://yidu.example.com/r/hr/card-link?to=" + doc},
		{"no public url", nil, doc},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(o *Options, _ *env) { o.Links = tt.links })
			msgID := "card-link"
			reg := e.registration(msgID, yidu.Audience{UserIDs: []string{"amy", "bo"}})
			reg.Body, reg.URL, reg.Send = "请于周五前阅读。\nRead by Friday.", doc, true
			if _, _, err := e.reg.Register(context.Background(), reg); err != nil {
				t.Fatal(err)
			}
			cards := sentCards(e.app.CorpID, msgID)
			if len(cards) != 1 {
				t.Fatalf("cards = %d; want 1", len(cards))
			}
			card := cards[0].Body["template_card"].(map[string]any)
			action, _ := card["card_action"].(map[string]any)
			if card["sub_title_text"] != reg.Body || action["type"] != 1.0 || action["url"] != tt.want {
				t.Errorf("card = %s; want the body and card_action url %q", cards[0].Raw, tt.want)
			}
			m, ok, err := e.reg.GetMessage(context.Background(), nil, msgID)
			if err != nil || !ok || m.Body != reg.Body || m.URL != doc {
				t.Errorf("GetMessage = %+v, %v, %v; want the body and url stored", m, ok, err)
			}
		})
	}
	t.Run("link error fails the send before any call", func(t *testing.T) {
		e := newEnv(t, func(o *Options, _ *env) {
			o.Links = func(yidu.App, string, string) (string, error) { return "", errors.New("no key") }
		})
		reg := e.registration("card-nolink", yidu.Audience{UserIDs: []string{"amy"}})
		reg.URL, reg.Send = doc, true
		if _, _, err := e.reg.Register(context.Background(), reg); err == nil {
			t.Error("Register succeeded; want the link error")
		}
		if n := len(sentCards(e.app.CorpID, "card-nolink")); n != 0 {
			t.Errorf("cards = %d; want 0", n)
		}
	})
}

// TestCardLimits: a card WeCom would cut is refused with ErrInvalid
// naming the field, before anything is written or sent.
func TestCardLimits(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tests := []struct {
		name, title, body, url, field string
		send                          bool
	}{
		{"title too long for a card", strings.Repeat("题", yidu.MaxCardTitle+1), "", "", "title", true},
		{"body too long", "T", strings.Repeat("文", yidu.MaxBody+1), "", "body", false},
		{"relative url", "T", "", "/p/1", "url", false},
		{"url with a space", "T", "", "https://x.example.com/a b", "url", false},
		{"url too long", "T", "", "https://x.example.com/" + strings.Repeat("a", yidu.MaxURL), "url", false},
		{"javascript url", "T", "", "javascript:alert(1)", "url", true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgID := fmt.Sprintf("limits-%d", i)
			reg := e.registration(msgID, yidu.Audience{UserIDs: []string{"amy"}})
			reg.Title, reg.Body, reg.URL, reg.Send = tt.title, tt.body, tt.url, tt.send
			_, _, err := e.reg.Register(ctx, reg)
			if !errors.Is(err, yidu.ErrInvalid) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("Register = %v; want ErrInvalid naming %q", err, tt.field)
			}
			if n := e.count(t, "SELECT COUNT(*) FROM messages WHERE corp_id = ? AND msgid = ?", e.app.CorpID, msgID); n != 0 {
				t.Errorf("messages rows = %d; want 0", n)
			}
		})
	}
	t.Run("a long title registered without send cannot be reminded", func(t *testing.T) {
		reg := e.registration("limits-remind", yidu.Audience{UserIDs: []string{"amy"}})
		reg.Title = strings.Repeat("题", yidu.MaxCardTitle+1)
		m, _, err := e.reg.Register(ctx, reg)
		testenv.Check(t, "register", err)
		if _, err := e.reg.Remind(ctx, m, []string{"amy"}); !errors.Is(err, yidu.ErrInvalid) || !strings.Contains(err.Error(), "title") {
			t.Errorf("Remind = %v; want ErrInvalid naming title", err)
		}
		if _, err := e.reg.Send(ctx, e.app, m); !errors.Is(err, yidu.ErrInvalid) {
			t.Errorf("Send = %v; want ErrInvalid", err)
		}
	})
}

// TestSendSkipsBadUserIDs: a synced member whose UserID breaks WeCom's
// rule is left out and counted; the batch goes to the others.
func TestSendSkipsBadUserIDs(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	reg := e.registration("bad-uid", yidu.Audience{UserIDs: []string{"amy", "bo", "cy"}})
	m, _, err := e.reg.Register(ctx, reg)
	testenv.Check(t, "register", err)
	// As a directory sync may have stored it.
	_, err = e.db.Exec("UPDATE users SET userid = '-bo' WHERE corp_id = ? AND userid = 'bo'", e.app.CorpID)
	testenv.Check(t, "break bo's userid", err)
	rep, err := e.reg.Send(ctx, e.app, m)
	if err != nil || rep.BadUserIDs != 1 || rep.Sent != 2 || len(rep.Outcomes) != 1 || rep.Outcomes[0].BadUserIDs != 1 {
		t.Fatalf("Send = %+v, %v; want 2 sent, 1 bad userid", rep, err)
	}
	cards := sentCards(e.app.CorpID, "bad-uid")
	if len(cards) != 1 || cards[0].Body["touser"] != "amy|cy" {
		t.Errorf("cards = %v; want one to amy|cy", cards)
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

// TestSendUnknownOutcome: a batch whose answer is lost is sent once more,
// identical, under WeCom's duplicate check, and never again after that.
func TestSendUnknownOutcome(t *testing.T) {
	t.Run("answer lost twice: unknown, resent once", func(t *testing.T) {
		e := newEnv(t)
		ctx := context.Background()
		var calls atomic.Int32
		var mu sync.Mutex
		var bodies [][]byte
		injectFault(t, "unknown-1", func(w http.ResponseWriter, r *http.Request, body []byte) bool {
			calls.Add(1)
			if strings.Contains(string(body), `"unknown-1@1"`) {
				mu.Lock()
				bodies = append(bodies, body)
				mu.Unlock()
				hangUp(w, r)
				return true
			}
			return false
		})
		reg := e.sendRegistration("unknown-1", 2500)
		rep := e.send(t, reg) // an unknown outcome is recorded, not an error
		if n := calls.Load(); n != 4 {
			t.Errorf("calls = %d; want 4 (the unknown batch resent once)", n)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(bodies) != 2 || string(bodies[0]) != string(bodies[1]) {
			t.Errorf("the resend differs from the first request: the duplicate check would not catch it")
		}
		want := []row{{0, statusSent, 0, "", false, true}, {1, statusUnknown, 0, "", true, false}, {2, statusSent, 0, "", false, true}}
		if got := e.sends(t, "unknown-1", kindSend); !slices.Equal(got, want) {
			t.Errorf("message_sends = %+v; want %+v", got, want)
		}
		if o := rep.Outcomes[1]; o.Status != yidu.SendUnknown || !o.Resent || rep.Unknown != 1000 {
			t.Errorf("report = %+v; want batch 1 unknown, resent", rep)
		}
		if _, _, err := e.reg.Register(ctx, reg); err != nil {
			t.Fatal(err)
		}
		if n := calls.Load(); n != 4 {
			t.Errorf("calls after re-registration = %d; want 4 (unknown batch never sent a third time)", n)
		}
	})

	t.Run("delivered, answer lost: the resend is not delivered twice", func(t *testing.T) {
		e := newEnv(t)
		var lost atomic.Bool
		injectFault(t, "unknown-2", func(w http.ResponseWriter, r *http.Request, body []byte) bool {
			if lost.CompareAndSwap(false, true) {
				// WeCom delivers the card; the answer never arrives.
				fake.ServeHTTP(httptestDiscard{}, requestWith(r, body))
				hangUp(w, r)
				return true
			}
			return false
		})
		reg := e.sendRegistration("unknown-2", 3)
		rep := e.send(t, reg)
		if n := len(sentCards(e.app.CorpID, "unknown-2")); n != 1 {
			t.Errorf("deliveries = %d; want 1", n)
		}
		if got := e.sends(t, "unknown-2", kindSend); len(got) != 1 || got[0].status != statusSent || !got[0].resent || !got[0].msgid {
			t.Errorf("message_sends = %+v; want one sent row, resent, with the msgid", got)
		}
		if o := rep.Outcomes[0]; o.Status != yidu.SendSent || !o.Resent {
			t.Errorf("outcome = %+v; want sent after a resend", o)
		}
	})

	t.Run("task_id used on the resend: delivered before", func(t *testing.T) {
		e := newEnv(t)
		lostThenAnswer(t, "unknown-3", `{"errcode":42014,"errmsg":"task_id used"}`)
		reg := e.sendRegistration("unknown-3", 3)
		if _, _, err := e.reg.Register(context.Background(), reg); err != nil {
			t.Fatal(err)
		}
		if got := e.sends(t, "unknown-3", kindSend); len(got) != 1 || got[0].status != statusSent || got[0].errcode != errTaskIDUsed || got[0].msgid {
			t.Errorf("message_sends = %+v; want sent with errcode 42014 and no msgid", got)
		}
	})

	t.Run("answer lost, resend refused: still unknown, never sent again", func(t *testing.T) {
		e := newEnv(t)
		calls := lostThenAnswer(t, "unknown-4", `{"errcode":45009,"errmsg":"api freq out of limit"}`)
		reg := e.sendRegistration("unknown-4", 3)
		ctx := context.Background()
		if _, _, err := e.reg.Register(ctx, reg); err != nil {
			t.Fatal(err)
		}
		if got := e.sends(t, "unknown-4", kindSend); !slices.Equal(got, []row{{0, statusUnknown, 0, "", true, false}}) {
			t.Errorf("message_sends = %+v; want unknown, resent", got)
		}
		n := calls.Load()
		if _, _, err := e.reg.Register(ctx, reg); err != nil {
			t.Fatal(err)
		}
		if calls.Load() != n {
			t.Errorf("calls after re-registration = %d; want %d", calls.Load(), n)
		}
	})

	t.Run("stuck unknown after a crash: resent by the next send within the interval", func(t *testing.T) {
		now := time.Now().UTC()
		e := newEnv(t, func(o *Options, _ *env) { o.Now = func() time.Time { return now } })
		ctx := context.Background()
		reg := e.registration("crash-1", yidu.Audience{UserIDs: userIDs(1500)})
		m, _, err := e.reg.Register(ctx, reg)
		testenv.Check(t, "register", err)
		// A process died during both calls: batch 0 two hours ago (inside
		// the 4 h interval), batch 1 five hours ago (outside).
		for n, ago := range []time.Duration{2 * time.Hour, 5 * time.Hour} {
			_, err := e.db.Exec("INSERT INTO message_sends (corp_id, msgid, kind, batch, status, sent_at, users) VALUES (?, ?, 'send', ?, 'unknown', ?, 1000)",
				e.app.CorpID, "crash-1", n, now.Add(-ago).Truncate(time.Millisecond))
			testenv.Check(t, "insert unknown row", err)
		}
		rep, err := e.reg.Send(ctx, e.app, m)
		if err != nil {
			t.Fatal(err)
		}
		cards := sentCards(e.app.CorpID, "crash-1")
		if len(cards) != 1 || taskID(cards[0]) != "crash-1@0" {
			t.Fatalf("cards = %d; want only batch 0 resent", len(cards))
		}
		want := []row{{0, statusSent, 0, "", true, true}, {1, statusUnknown, 0, "", false, false}}
		if got := e.sends(t, "crash-1", kindSend); !slices.Equal(got, want) {
			t.Errorf("message_sends = %+v; want %+v", got, want)
		}
		if rep.Outcomes[0].Status != yidu.SendSent || !rep.Outcomes[0].Resent || !rep.Outcomes[1].Earlier || rep.Outcomes[1].Status != yidu.SendUnknown {
			t.Errorf("report = %+v", rep)
		}
	})
}

// httptestDiscard is a ResponseWriter that drops the answer.
type httptestDiscard struct{}

func (httptestDiscard) Header() http.Header         { return http.Header{} }
func (httptestDiscard) Write(b []byte) (int, error) { return len(b), nil }
func (httptestDiscard) WriteHeader(int)             {}

// requestWith returns r with its body replaced by body.
func requestWith(r *http.Request, body []byte) *http.Request {
	c := r.Clone(r.Context())
	c.Body = io.NopCloser(bytes.NewReader(body))
	return c
}

// TestSendFrequencyLimit: on 45009 the batch waits WeCom's minute block
// before each retry; still refused, it is reported with its errcode, and
// the batches after it are not attempted (a later send sends them).
func TestSendFrequencyLimit(t *testing.T) {
	e := newEnv(t)
	reg := e.sendRegistration("busy-1", 2500)
	fake.FailNext("/cgi-bin/message/send", fakewecom.ErrAPIFrequency, 3) // every attempt of batch 0
	rep := e.send(t, reg)
	for _, d := range e.sleeps() {
		if d < time.Minute {
			t.Errorf("waited %v before a retry after 45009; want at least a minute", d)
		}
	}
	if n := len(e.sleeps()); n != 2 {
		t.Errorf("waits = %d; want 2 (3 attempts)", n)
	}
	if got := e.sends(t, "busy-1", kindSend); !slices.Equal(got, []row{{0, statusRefused, 45009, "", false, false}}) {
		t.Errorf("message_sends = %+v; want batch 0 refused with 45009, nothing else attempted", got)
	}
	wantStatus := []yidu.SendStatus{yidu.SendRefused, yidu.SendUnsent, yidu.SendUnsent}
	for n, o := range rep.Outcomes {
		if o.Status != wantStatus[n] {
			t.Errorf("outcome %d = %+v; want %s", n, o, wantStatus[n])
		}
	}
	if rep.Outcomes[0].ErrCode != 45009 {
		t.Errorf("batch 0 errcode = %d; want 45009", rep.Outcomes[0].ErrCode)
	}
	if len(sentCards(e.app.CorpID, "busy-1")) != 0 {
		t.Error("a card was delivered")
	}

	// The block passed: sending again delivers every batch once.
	rep = e.send(t, reg)
	if n := len(sentCards(e.app.CorpID, "busy-1")); n != 3 {
		t.Errorf("cards = %d; want 3", n)
	}
	if got := e.sends(t, "busy-1", kindSend); len(got) != 4 || got[1].status != statusSent {
		t.Errorf("message_sends = %+v; want refused then sent for batch 0, and 1, 2 sent", got)
	}
}

// TestSendWeComUnreachable (issue 13): a send that reaches nobody says so
// batch by batch, stops after the first batch's retries, and the next
// send delivers everything.
func TestSendWeComUnreachable(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	// The app's secret was rotated at WeCom: gettoken fails, nothing leaves.
	fake.SetCorp(fakewecom.Corp{CorpID: e.app.CorpID, Apps: []fakewecom.App{{AgentID: e.app.AgentID, Secret: "rotated"}}})
	reg := e.sendRegistration("unreachable-1", 2500)
	res, err := e.reg.RegisterAndSend(ctx, reg)
	created, rep := res.Created, res.Send
	if err != nil || !created {
		t.Fatalf("Register = %v, %v; the registration stands", err, created)
	}
	if rep.Batches != 1 || len(rep.Outcomes) != 3 || len(e.sleeps()) != 2 {
		t.Errorf("report = %+v after %d waits; want one batch tried 3 times, 3 outcomes", rep, len(e.sleeps()))
	}
	for _, o := range rep.Outcomes {
		if o.Status != yidu.SendUnsent {
			t.Errorf("outcome %+v; want unsent", o)
		}
	}
	if got := e.sends(t, "unreachable-1", kindSend); !slices.Equal(got, []row{{0, statusUnsent, 0, "", false, false}}) {
		t.Errorf("message_sends = %+v; want batch 0 unsent only", got)
	}
	fake.SetCorp(fakewecom.Corp{CorpID: e.app.CorpID, Apps: []fakewecom.App{{AgentID: e.app.AgentID, Secret: e.secret}}})
	if res, err = e.reg.RegisterAndSend(ctx, reg); err != nil || res.Send.Sent != 2500 {
		t.Fatalf("send again = %+v, %v; want everyone", rep, err)
	}
	if n := len(sentCards(e.app.CorpID, "unreachable-1")); n != 3 {
		t.Errorf("cards = %d; want 3", n)
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

func (s *scripted) RecallMessage(context.Context, string, int64, string) (wecom.RecallResult, error) {
	res, err := s.SendMessage(context.Background(), "", 0, nil)
	return wecom.RecallResult{ErrCode: res.ErrCode, ErrMsg: res.ErrMsg}, err
}

// TestCallClassification runs in a synctest bubble: the minute WeCom
// blocks the API for passes on the bubble's clock.
func TestCallClassification(t *testing.T) {
	ok := func() (wecom.SendResult, error) { return wecom.SendResult{InvalidUsers: []string{"x"}}, nil }
	code := func(c int64) func() (wecom.SendResult, error) {
		return func() (wecom.SendResult, error) { return wecom.SendResult{ErrCode: c, ErrMsg: "no"}, nil }
	}
	notSent := func() (wecom.SendResult, error) {
		return wecom.SendResult{}, fmt.Errorf("%w: dial: refused", wecom.ErrNotSent)
	}
	lost := func() (wecom.SendResult, error) { return wecom.SendResult{}, errors.New("EOF after write") }
	type answers = []func() (wecom.SendResult, error)
	tests := []struct {
		name    string
		answers answers
		status  string
		calls   int
		waited  time.Duration // at least
	}{
		{"ok", answers{ok}, statusSent, 1, 0},
		{"busy then ok", answers{code(-1), code(45009), ok}, statusSent, 3, time.Minute},
		{"rate limited throughout", answers{code(45009)}, statusRefused, 3, 2 * time.Minute},
		{"concurrency limit", answers{code(45033), ok}, statusSent, 2, time.Minute},
		{"stale token then ok", answers{code(42001), ok}, statusSent, 2, 0},
		{"task id reused: not retried", answers{code(42014)}, statusRefused, 1, 0},
		{"all users invalid: not retried", answers{code(81013)}, statusRefused, 1, 0},
		{"not sent then ok", answers{notSent, ok}, statusSent, 2, 0},
		{"never sent", answers{notSent}, statusUnsent, 3, 0},
		{"lost answer: not retried here", answers{lost, ok}, statusUnknown, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &scripted{answers: tt.answers}
				r := mustNew(t, nil, nil, nil, Options{Sender: s, Retry: Retry{Attempts: 3, Initial: time.Millisecond, Max: time.Millisecond}})
				start := time.Now()
				status, _, _ := r.call(context.Background(), yidu.Message{}, nil)
				waited := time.Since(start)
				if status != tt.status || s.calls != tt.calls {
					t.Errorf("call = %s after %d calls; want %s after %d", status, s.calls, tt.status, tt.calls)
				}
				if waited < tt.waited || tt.waited == 0 && waited >= time.Minute {
					t.Errorf("call waited %v; want at least %v (and a minute only for frequency)", waited, tt.waited)
				}
			})
		})
	}
}

func TestRemind(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	reg := e.registration("remind-1", yidu.Audience{UserIDs: userIDs(1500)})
	reg.Body, reg.URL = "正文 body", "https://intranet.example.com/doc"
	m, _, err := e.reg.Register(ctx, reg)
	testenv.Check(t, "register", err)
	if _, ok, err := e.reg.LastReminder(ctx, e.app.CorpID, "remind-1"); ok || err != nil {
		t.Fatalf("LastReminder before any = %v, %v", ok, err)
	}
	rep, err := e.reg.Remind(ctx, m, userIDs(1200))
	if err != nil || rep.Reminded != 1200 || rep.Batches != 2 || len(rep.Outcomes) != 2 || !rep.Outcomes[1].Reminder {
		t.Fatalf("Remind = %+v, %v; want 1200 reminded in 2 batches", rep, err)
	}
	rep, err = e.reg.Remind(ctx, m, []string{"u0003", "u0002", "u0003"})
	if err != nil || rep.Reminded != 2 {
		t.Fatalf("second Remind = %+v, %v", rep, err)
	}
	var tasks []string
	cards := sentCards(e.app.CorpID, "remind-1")
	for _, c := range cards {
		tasks = append(tasks, taskID(c))
	}
	if want := []string{"remind-1@r1-0", "remind-1@r1-1", "remind-1@r2-0"}; !slices.Equal(tasks, want) {
		t.Errorf("reminder task_ids = %v; want %v", tasks, want)
	}
	card := cards[0].Body["template_card"].(map[string]any)
	if card["main_title"].(map[string]any)["desc"] != reminderDesc || card["sub_title_text"] != reg.Body ||
		card["card_action"].(map[string]any)["url"] != reg.URL {
		t.Errorf("reminder card = %s; want the notice's body and url", cards[0].Raw)
	}
	at, ok, err := e.reg.LastReminder(ctx, e.app.CorpID, "remind-1")
	if err != nil || !ok || time.Since(at).Abs() > time.Minute {
		t.Errorf("LastReminder = %v, %v, %v; want about now", at, ok, err)
	}
	if rows := e.sends(t, "remind-1", kindRemind); len(rows) != 3 {
		t.Errorf("remind rows = %+v; want 3", rows)
	}
}

// send registers reg and sends it, failing tb unless both succeed (an
// unknown or refused batch is a report, not an error), and returns the
// send report.
func (e *env) send(tb testing.TB, reg yidu.Registration) yidu.SendReport {
	tb.Helper()
	res, err := e.reg.RegisterAndSend(context.Background(), reg)
	testenv.Check(tb, "RegisterAndSend "+reg.MsgID, err)
	return res.Send
}

// lostThenAnswer makes the first message/send of msgID lose its answer
// (the connection hangs up) and answers every later one with answer. It
// returns the count of calls.
func lostThenAnswer(t *testing.T, msgID, answer string) *atomic.Int32 {
	var calls atomic.Int32
	injectFault(t, msgID, func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if calls.Add(1) == 1 {
			hangUp(w, r)
		} else {
			fmt.Fprint(w, answer)
		}
		return true
	})
	return &calls
}

// TestRemindSkipsBadUserIDs: one member whose UserID breaks WeCom's rule
// is skipped and reported; the others are reminded.
func TestRemindSkipsBadUserIDs(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	m := e.register(t, "remind-bad", yidu.Audience{UserIDs: userIDs(3)})
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
