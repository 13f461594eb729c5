package tracker

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/ledger"
)

// TestSendLedger: each recipient of each recorded send batch gets one
// evidence entry with WeCom's answer, in the transaction that records the
// batch's outcome; verify agrees, and names the entries once a batch's
// errcode is changed by hand.
func TestSendLedger(t *testing.T) {
	var l *ledger.Ledger
	e := newEnv(t, func(o *Options, e *env) {
		var err error
		l, err = ledger.New(e.db, ledger.Options{})
		testenv.Check(t, "ledger", err)
		o.Ledger = l
	})
	ctx := context.Background()
	fake.SetCorp(fakewecom.Corp{CorpID: e.app.CorpID, Apps: []fakewecom.App{{AgentID: e.app.AgentID, Secret: e.secret}}, InvalidUsers: []string{"u0007"}})
	res, err := e.reg.RegisterAndSend(ctx, e.sendRegistration("ledger-send", 1500))
	if err != nil {
		t.Fatal(err)
	}
	// A reminder to u0007 (a batch of UserIDs): one reminder entry.
	if _, err := e.reg.Remind(ctx, res.Message, []string{"u0007"}); err != nil {
		t.Fatal(err)
	}
	var n int
	testenv.Check(t, "count", e.db.QueryRow("SELECT COALESCE(SUM(count), 0) FROM ledger_blocks WHERE corp_id = ? AND kind = 'send'", e.app.CorpID).Scan(&n))
	if n != 1500 {
		t.Fatalf("%d send entries; want 1500", n)
	}
	es, err := l.EntriesFor(ctx, e.app.CorpID, "ledger-send", "u0007")
	testenv.Check(t, "EntriesFor", err)
	if len(es) != 2 || es[0].Kind != ledger.KindSend || es[1].Kind != ledger.KindReminder || es[1].UID != es[0].UID {
		t.Fatalf("EntriesFor(u0007) = %+v; want a send entry and a reminder entry", es)
	}
	var body struct {
		UserID     string `json:"userid"`
		Batch      int    `json:"batch"`
		ErrCode    int    `json:"errcode"`
		WeComMsgID string `json:"wecom_msgid"`
		Invalid    bool   `json:"invalid"`
	}
	testenv.Check(t, "body", json.Unmarshal(es[0].Body, &body))
	if body.UserID != "u0007" || body.Batch != 0 || body.ErrCode != 0 || body.WeComMsgID == "" || !body.Invalid {
		t.Errorf("u0007's entry = %s; want batch 0, errcode 0, WeCom's msgid, invalid", es[0].Body)
	}
	// The recipient binding at send (issue 48): the directory's name, the
	// departments of send_departments, and batch 0's notice title; a
	// reminder names the member but not the title.
	var name, title string
	testenv.Check(t, "name", e.db.QueryRow("SELECT name FROM users WHERE corp_id = ? AND userid = 'u0007'", e.app.CorpID).Scan(&name))
	testenv.Check(t, "title", e.db.QueryRow("SELECT title FROM messages WHERE corp_id = ? AND msgid = 'ledger-send'", e.app.CorpID).Scan(&title))
	var bind struct {
		Name        *string   `json:"name"`
		Departments *[]string `json:"departments"`
		Title       *string   `json:"title"`
	}
	testenv.Check(t, "body", json.Unmarshal(es[0].Body, &bind))
	if bind.Name == nil || *bind.Name != name || bind.Departments == nil || bind.Title == nil || *bind.Title != title || title == "" {
		t.Errorf("u0007's send entry = %s; want name %q, its departments at send, title %q", es[0].Body, name, title)
	}
	bind.Name, bind.Title = nil, nil
	testenv.Check(t, "body", json.Unmarshal(es[1].Body, &bind))
	if bind.Name == nil || *bind.Name != name || bind.Title != nil {
		t.Errorf("u0007's reminder entry = %s; want name %q, no title", es[1].Body, name)
	}
	rep, err := l.Verify(ctx, e.app.CorpID, "")
	testenv.Check(t, "Verify", err)
	if len(rep.Problems) != 0 || rep.Entries != 1501 {
		t.Fatalf("Verify = %d entries, %v; want 1501, clean", rep.Entries, rep.Problems)
	}
	if _, err := e.db.Exec("UPDATE message_sends SET errcode = 40003 WHERE corp_id = ? AND msgid = 'ledger-send' AND batch = 1", e.app.CorpID); err != nil {
		t.Fatal(err)
	}
	rep, err = l.Verify(ctx, e.app.CorpID, "")
	testenv.Check(t, "Verify", err)
	if len(rep.Problems) != 500 || rep.Problems[0].Seq != 1001 || rep.Problems[0].What != "altered" || !strings.Contains(rep.Problems[0].Detail, "errcode 40003") {
		t.Fatalf("Verify after the edit: %d problems, first %v; want batch 1's 500 entries from 1001", len(rep.Problems), rep.Problems[0])
	}
}
