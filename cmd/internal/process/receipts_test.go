package process

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestAcknowledgementReceipt (issue 48): a member who acknowledges a
// notice on the reading page gets exactly one WeCom message from the
// notice's app naming the notice, the version's hash and the
// acknowledgement's entry in the log; the receipt is sent (ack_receipts);
// a member who only read gets none; with the app's receipts: false
// nobody does.
func TestAcknowledgementReceipt(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("receipts=%v", on), func(t *testing.T) { testReceipt(t, on) })
	}
}

func testReceipt(t *testing.T, on bool) {
	addr := freeAddr(t)
	fake := fakewecom.New(fakewecom.Corp{CorpID: testCorp,
		Apps:        []fakewecom.App{{AgentID: testAgent, Secret: pageSecret, RedirectDomain: addr}},
		Users:       []fakewecom.User{{UserID: "zhangsan", Name: "张三", Departments: []int{1}}, {UserID: "lisi", Name: "李四", Departments: []int{1}}},
		Departments: []fakewecom.Department{{ID: 1, Name: "总公司"}}})
	base := fakewecom.Start(t, fake)
	m := mustRunMainWith(t, func(c *config.Config) {
		c.WeCom.APIBase, c.WeCom.OAuthBase, c.WeCom.LoginBase = base, base, base
		c.Apps[0].Secret = pageSecret
		if !on {
			off := false
			c.Apps[0].Receipts = &off
		}
		c.Receiver.Listen = addr
		c.Receiver.PublicURL = "http://" + addr
	})
	reg := map[string]any{"msgid": "rule-rcpt", "app": "hr", "title": "考勤制度", "send": true,
		"audience": map[string]any{"userids": []string{"zhangsan", "lisi"}},
		"content":  map[string]any{"markdown": "# 第一条\n\n九点上班。"}, "read_rule": "acknowledged"}
	if code := api(t, m, "POST", "/messages", reg, nil); code != http.StatusCreated {
		t.Fatalf("send = %d; want 201", code)
	}
	const page = "/r/hr/rule-rcpt"
	zs, ls := newReader(t, addr, "zhangsan"), newReader(t, addr, "lisi")
	view := zs.open(page)
	for _, ev := range []string{"read_to_end", "acknowledged"} {
		if code, e := zs.event(page, ev, 1, view); code != 200 {
			t.Fatalf("%s = %d %s", ev, code, e)
		}
	}
	if code, e := ls.event(page, "read_to_end", 1, ls.open(page)); code != 200 {
		t.Fatalf("lisi's read_to_end = %d %s", code, e)
	}
	// The acknowledgement's page entry in the log, and the version's hash.
	var seq uint64
	testenv.WaitFor(t, 20*time.Second, "the acknowledgement in the log", func() bool {
		es, err := m.Ledger.EntriesFor(context.Background(), testCorp, "rule-rcpt", "zhangsan")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if e.Kind == "page" && strings.Contains(string(e.Body), `"signal":"acknowledged"`) {
				seq = e.Seq
			}
		}
		return seq > 0
	})
	sum := testenv.Column[string](t, m.DB, "SELECT LOWER(HEX(sha256)) FROM notice_versions WHERE msgid = 'rule-rcpt' AND version = 1")[0]
	receipts := func() []string {
		var out []string
		for _, s := range fake.Sent() {
			if strings.Contains(string(s.Raw), "已确认回执") {
				out = append(out, string(s.Raw))
			}
		}
		return out
	}
	if !on {
		testenv.WaitFor(t, 20*time.Second, "the receipt turned off", func() bool {
			return testenv.Column[string](t, m.DB, "SELECT state FROM ack_receipts WHERE msgid = 'rule-rcpt'")[0] == "off"
		})
		if got := receipts(); len(got) != 0 {
			t.Fatalf("receipts with receipts: false = %q; want none", got)
		}
		return
	}
	testenv.WaitFor(t, 20*time.Second, "the receipt sent", func() bool { return len(receipts()) > 0 })
	time.Sleep(2500 * time.Millisecond) // two more turns of the receipt loop: still one
	got := receipts()
	if len(got) != 1 {
		t.Fatalf("receipts = %d %q; want exactly one", len(got), got)
	}
	r := got[0]
	for _, want := range []string{`"touser":"zhangsan"`, fmt.Sprintf(`"agentid":%d`, testAgent), "考勤制度", sum[:16], sum,
		fmt.Sprintf("索引 %d", seq-1)} {
		if !strings.Contains(r, want) {
			t.Errorf("receipt %s lacks %q", r, want)
		}
	}
	t.Logf("receipt: %s", r)
	states := testenv.Column[string](t, m.DB, "SELECT CONCAT(u.userid, '/', a.state, '/', a.seq, '/', a.sent_at IS NOT NULL) FROM ack_receipts a JOIN users u ON u.corp_id = a.corp_id AND u.uid = a.uid WHERE a.msgid = 'rule-rcpt'")
	if want := fmt.Sprintf("zhangsan/sent/%d/1", seq); len(states) != 1 || states[0] != want {
		t.Errorf("ack_receipts = %q; want [%s]", states, want)
	}
	// 我的记录 lists the receipt, sent.
	if code, body := zs.get("/r/hr/records/zhangsan"); code != http.StatusOK || !strings.Contains(body, "确认回执") || !strings.Contains(body, "第 1 版：已发送 20") {
		t.Errorf("我的记录 lacks the sent receipt:\n%s", body)
	}
}
