package tracker

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/wecom"
)

// scriptedSender answers message/send with the errcodes of its script
// per touser, in order (0 once the script ends), and records the bodies.
type scriptedSender struct {
	mu     sync.Mutex
	script map[string][]int64
	bodies []string
}

func (s *scriptedSender) SendMessage(_ context.Context, _ string, _ int64, body []byte) (wecom.SendResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bodies = append(s.bodies, string(body))
	for u, codes := range s.script {
		if strings.Contains(string(body), `"touser":"`+u+`"`) && len(codes) > 0 {
			s.script[u] = codes[1:]
			return wecom.SendResult{ErrCode: codes[0], ErrMsg: "scripted"}, nil
		}
	}
	return wecom.SendResult{}, nil
}

func (s *scriptedSender) RecallMessage(context.Context, string, int64, string) (wecom.RecallResult, error) {
	return wecom.RecallResult{}, nil
}

// TestReceiptRetries: a receipt WeCom refuses for frequency is retried
// later (not before its backoff) and then sent once; one refused with a
// final errcode is recorded refused and not sent again; one of an app
// with receipts off is never sent; a receipt claimed by one replica is
// not sent by another.
func TestReceiptRetries(t *testing.T) {
	ctx := context.Background()
	snd := &scriptedSender{script: map[string][]int64{"u1": {45009}, "u2": {81013}}}
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	var clock sync.Mutex
	e := newEnv(t, func(o *Options, e *env) {
		o.Sender = snd
		o.Now = func() time.Time { clock.Lock(); defer clock.Unlock(); return now }
		off := e.app
		off.Name, off.AgentID, off.NoReceipts = "quiet", 1000009, true
		o.Apps = append(o.Apps, off)
	})
	m := e.register(t, "rcpt-1", yidu.Audience{UserIDs: []string{"u1", "u2", "u3"}})
	uids := e.rows(t, m.MsgID)
	quiet := e.registration("rcpt-2", yidu.Audience{UserIDs: []string{"u1"}})
	quiet.App = yidu.App{Name: "quiet", CorpID: e.app.CorpID, AgentID: 1000009, NoReceipts: true}
	if _, _, err := e.reg.Register(ctx, quiet); err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		_, err := e.db.Exec(q, args...)
		testenv.Check(t, q, err)
	}
	for i, uid := range uids {
		exec("INSERT INTO ack_receipts (corp_id, msgid, uid, version, seq, acked_at, next_at) VALUES (?, ?, ?, 1, ?, ?, ?)",
			e.app.CorpID, m.MsgID, uid, 40+i, now, now)
	}
	exec("INSERT INTO ack_receipts (corp_id, msgid, uid, version, seq, acked_at, next_at) VALUES (?, 'rcpt-2', ?, 1, 50, ?, ?)",
		e.app.CorpID, uids[0], now, now)
	state := func() string {
		return strings.Join(testenv.Column[string](t, e.db, `SELECT CONCAT(a.msgid, '/', u.userid, '/', a.state, '/', a.attempts, '/', COALESCE(a.errcode, '-'))
FROM ack_receipts a JOIN users u ON u.corp_id = a.corp_id AND u.uid = a.uid WHERE a.corp_id = ? ORDER BY a.msgid, u.userid`, e.app.CorpID), " ")
	}
	n, err := e.reg.SendReceipts(ctx, "replica-a")
	if err != nil || n != 1 {
		t.Fatalf("first turn sent %d, %v; want 1 (u3)", n, err)
	}
	if got, want := state(), "rcpt-1/u1/queued/1/45009 rcpt-1/u2/refused/1/81013 rcpt-1/u3/sent/1/0 rcpt-2/u1/off/0/-"; got != want {
		t.Fatalf("after the first turn: %s; want %s", got, want)
	}
	// Not before its backoff (at least WeCom's minute block).
	if n, err := e.reg.SendReceipts(ctx, "replica-b"); err != nil || n != 0 {
		t.Fatalf("a turn within the backoff sent %d, %v; want 0", n, err)
	}
	clock.Lock()
	now = now.Add(2 * time.Minute)
	clock.Unlock()
	if n, err := e.reg.SendReceipts(ctx, "replica-b"); err != nil || n != 1 {
		t.Fatalf("after the backoff sent %d, %v; want 1 (u1)", n, err)
	}
	if got, want := state(), "rcpt-1/u1/sent/2/0 rcpt-1/u2/refused/1/81013 rcpt-1/u3/sent/1/0 rcpt-2/u1/off/0/-"; got != want {
		t.Fatalf("after the retry: %s; want %s", got, want)
	}
	clock.Lock()
	now = now.Add(time.Hour)
	clock.Unlock()
	if n, _ := e.reg.SendReceipts(ctx, "replica-a"); n != 0 {
		t.Errorf("a later turn sent %d; want 0", n)
	}
	// WeCom saw u1 twice (refused, then sent), u2 once, u3 once, nobody
	// from the quiet app.
	if len(snd.bodies) != 4 {
		t.Errorf("message/send calls = %d; want 4: %q", len(snd.bodies), snd.bodies)
	}
	for _, b := range snd.bodies {
		if !strings.Contains(b, `"agentid":1000002`) || !strings.Contains(b, "索引 ") {
			t.Errorf("receipt %s: not from the notice's app or without its index", b)
		}
	}
}

// TestReceiptText: the receipt names the notice, the time in
// Asia/Shanghai, the hash (short and full) and the entry's index.
func TestReceiptText(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	got := ReceiptText("考勤制度", 2, sum, time.Date(2026, 3, 2, 1, 2, 3, 0, time.UTC), 17)
	for _, want := range []string{"「考勤制度」", "2026-03-02 09:02:03（北京时间）", "第 2 版，内容哈希 abababababababab\n", "第 17 条（索引 16）", sum} {
		if !strings.Contains(got, want) {
			t.Errorf("receipt %q lacks %q", got, want)
		}
	}
}

// TestClaimedReceiptsByOwner (issue 50): a receipt turn reads back what
// it claimed through the owner's index, not by scanning every queued
// receipt (after a storm, every acknowledgement, each second).
func TestClaimedReceiptsByOwner(t *testing.T) {
	e := newEnv(t)
	var id, selectType, table string
	var possible, key, keyLen, ref, extra sql.NullString
	var rows sql.NullInt64
	found := false
	r, err := e.db.Query("EXPLAIN "+claimedReceipts, "someone@1")
	testenv.Check(t, "EXPLAIN", err)
	defer r.Close()
	for r.Next() {
		testenv.Check(t, "Scan", r.Scan(&id, &selectType, &table, &sql.NullString{}, &possible, &key, &keyLen, &ref, &rows, &extra))
		if table == "a" {
			found = true
			if key.String != "ack_receipts_owner" {
				t.Errorf("ack_receipts read by key %q (possible %q); want ack_receipts_owner", key.String, possible.String)
			}
		}
	}
	if !found {
		t.Fatal("EXPLAIN names no ack_receipts")
	}
}
