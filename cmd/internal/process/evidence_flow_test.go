package process

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	flog "github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/evidence"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/ledger"
)

// TestEvidenceFullFlow (issue 40, Done when): on real MariaDB, Redis and
// Kafka with a fake WeCom, zhangsan is sent version 1 of a notice read
// under read_rule acknowledged, reminded once (提醒未读), opens and
// acknowledges version 1 on the reading page; version 2 is published as
// material, he gets its update card and acknowledges version 2. Between
// the send and the record, the directory moves him and renames his
// department. His evidence JSON has every fact in time order with its
// version: the send (WeCom's msgid, errcode, not unlicensed; lisi, whom
// WeCom answers in unlicenseduser, is), the reminder, the update card,
// each page signal with its version, source, IP and User-Agent, and one
// ledger entry per fact with a proof that checks against the day's root;
// the departments are the send's. pdftotext of his PDF shows his name,
// UserID, both version hashes, both acknowledgement times and the day's
// root. verify is then run over the corp's ledger.
func TestEvidenceFullFlow(t *testing.T) {
	pdftotext := testenv.LookPath(t, "pdftotext")
	addr := freeAddr(t)
	fake := fakewecom.New(fakewecom.Corp{CorpID: testCorp,
		Apps:            []fakewecom.App{{AgentID: testAgent, Secret: pageSecret, RedirectDomain: addr}},
		Users:           []fakewecom.User{{UserID: "zhangsan", Name: "张三", Departments: []int{2}}, {UserID: "lisi", Name: "李四", Departments: []int{2}}},
		Departments:     []fakewecom.Department{{ID: 1, Name: "总公司"}, {ID: 2, ParentID: 1, Name: "人力资源部"}},
		UnlicensedUsers: []string{"lisi"}})
	base := fakewecom.Start(t, fake)
	m := mustRunMainWith(t, func(c *config.Config) {
		c.WeCom.APIBase, c.WeCom.OAuthBase, c.WeCom.LoginBase = base, base, base
		c.Apps[0].Secret = pageSecret
		c.Receiver.Listen = addr
		c.Receiver.PublicURL = "http://" + addr
	})
	sqlExec := func(q string, args ...any) {
		t.Helper()
		if _, err := m.DB.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// The directory as a sync leaves it: both in 人力资源部.
	sqlExec("INSERT INTO departments (corp_id, dept_id, parent_id, name) VALUES (?, 1, 0, '总公司'), (?, 2, 1, '人力资源部'), (?, 3, 1, '行政部')", testCorp, testCorp, testCorp)
	sqlExec("UPDATE users SET name = '张三', departments = '2' WHERE corp_id = ? AND userid = 'zhangsan'", testCorp)
	sqlExec("UPDATE users SET name = '李四', departments = '2' WHERE corp_id = ? AND userid = 'lisi'", testCorp)

	const msg, page = "rule-ev", "/r/hr/rule-ev"
	reg := map[string]any{"msgid": msg, "app": "hr", "title": "考勤制度", "send": true,
		"audience": map[string]any{"userids": []string{"zhangsan", "lisi"}},
		"content":  map[string]any{"markdown": "# 第一条\n\n九点上班。"}, "read_rule": "acknowledged"}
	if code := api(t, m, "POST", "/messages", reg, nil); code != http.StatusCreated {
		t.Fatalf("send = %d; want 201", code)
	}
	// After the send: zhangsan moves to 行政部, 人力资源部 is renamed.
	sqlExec("UPDATE users SET departments = '3' WHERE corp_id = ? AND userid = 'zhangsan'", testCorp)
	sqlExec("UPDATE departments SET name = '人事部' WHERE corp_id = ? AND dept_id = 2", testCorp)

	if code := api(t, m, "POST", "/messages/"+msg+"/remind", map[string]any{}, nil); code != http.StatusOK {
		t.Fatalf("remind = %d; want 200", code)
	}
	waitRead := func(what string, query string, want int) {
		t.Helper()
		testenv.WaitFor(t, 20*time.Second, what, func() bool {
			return testenv.Column[int](t, m.DB, query)[0] == want
		})
	}
	ack := func(rd *reader, version int) {
		t.Helper()
		view := rd.open(page)
		for _, ev := range []string{"read_to_end", "acknowledged"} {
			if code, e := rd.event(page, ev, version, view); code != 200 {
				t.Fatalf("%s v%d = %d %s", ev, version, code, e)
			}
		}
	}
	// Whole seconds apart: page_signals keeps seconds (a signal in the
	// send's second would sort before its delivery).
	time.Sleep(1100 * time.Millisecond)
	zs := newReader(t, addr, "zhangsan")
	ack(zs, 1)
	waitRead("v1's acknowledgement in MySQL", "SELECT COUNT(*) FROM message_read_record WHERE msgid = 'rule-ev' AND is_read = 1", 1)
	time.Sleep(1100 * time.Millisecond) // v2 in a later second than v1's signals
	if code := api(t, m, "PATCH", "/messages/"+msg, map[string]any{"content": map[string]any{"markdown": "# 第一条\n\n八点半上班。"}, "reacknowledge": true}, nil); code != http.StatusOK {
		t.Fatalf("PATCH = %d; want 200", code)
	}
	waitRead("v2 is material: unread again", "SELECT COUNT(*) FROM message_read_record WHERE msgid = 'rule-ev' AND is_read = 1", 0)
	time.Sleep(1100 * time.Millisecond)
	ack(zs, 2)
	waitRead("v2's acknowledgement in MySQL", "SELECT COUNT(*) FROM message_read_record WHERE msgid = 'rule-ev' AND is_read = 1 AND source = 6", 1)
	waitRead("page_signals: both acknowledgements", "SELECT COUNT(*) FROM page_signals WHERE msgid = 'rule-ev' AND source = 6", 2)

	var rec evidence.Record
	if code := api(t, m, "GET", "/messages/"+msg+"/evidence/zhangsan", nil, &rec); code != http.StatusOK {
		t.Fatalf("evidence = %d", code)
	}
	// Who: the departments of the send, not today's.
	p := rec.Person
	if p.Name != "张三" || p.UserID != "zhangsan" || p.DepartmentsAsOf != "send" || p.DepartmentsAt == nil ||
		len(p.Departments) != 1 || p.Departments[0].ID != 2 || p.Departments[0].Name != "人力资源部" {
		t.Errorf("person = %+v; want 张三 in 人力资源部 as of the send", p)
	}
	// What: both versions, v2 material.
	if len(rec.Versions) != 2 || rec.Versions[0].N != 1 || rec.Versions[1].N != 2 || !rec.Versions[1].Reacknowledge || rec.Versions[0].SHA256 == rec.Versions[1].SHA256 {
		t.Fatalf("versions = %+v; want v1, then v2 material", rec.Versions)
	}
	// Delivery: the send, WeCom's answer, of version 1.
	if len(rec.Deliveries) != 1 || rec.Deliveries[0].Status != "sent" || rec.Deliveries[0].ErrCode != 0 || rec.Deliveries[0].WeComMsgID == "" ||
		rec.Deliveries[0].Version != 1 || rec.Deliveries[0].Unlicensed == nil || *rec.Deliveries[0].Unlicensed || rec.Deliveries[0].InvalidUser {
		t.Errorf("deliveries = %+v; want the one send of v1, delivered, licensed", rec.Deliveries)
	}
	// Follow-ups: the reminder, then version 2's update card.
	if len(rec.FollowUps) != 2 || rec.FollowUps[0].Kind != "manual" || rec.FollowUps[1].Kind != "update_card" || rec.FollowUps[1].Version != 2 {
		t.Errorf("follow_ups = %+v; want the reminder, then v2's update card", rec.FollowUps)
	}
	// Signals: the page's, each with its version, IP and User-Agent.
	var pageSigs []string
	acks := map[int]time.Time{}
	for _, s := range rec.Signals {
		if s.Source != "page" || s.VersionInferred {
			continue
		}
		if s.ClientIP == "" || s.UserAgent != wecomUA {
			t.Errorf("page signal %+v; want the client's IP and User-Agent", s)
		}
		pageSigs = append(pageSigs, fmt.Sprintf("%s/v%d", s.Kind, s.Version))
		if s.Kind == "acknowledged" {
			acks[s.Version] = s.At
		}
	}
	if got, want := strings.Join(pageSigs, " "), "link/v1 read_to_end/v1 acknowledged/v1 link/v2 read_to_end/v2 acknowledged/v2"; got != want {
		t.Errorf("page signals = %s; want %s", got, want)
	}
	// The timeline: in time order, the facts in the order they happened.
	var order []string
	for i, e := range rec.Timeline {
		if i > 0 && e.At.Before(rec.Timeline[i-1].At) {
			t.Errorf("timeline out of order at %d: %+v after %+v", i, e, rec.Timeline[i-1])
		}
		k := e.Kind
		switch {
		case e.Kind == "signal" && strings.Contains(e.Detail, "acknowledged"):
			k = fmt.Sprintf("ack v%d", e.Version)
		case e.Kind == "signal":
			continue
		case e.Kind == "follow_up":
			k = strings.Fields(e.Detail)[0]
		case e.Kind == "version":
			k = fmt.Sprintf("version %d", e.Version)
		}
		order = append(order, k)
	}
	// Version 1 is kept before the cards leave (campaign.Post registers,
	// keeps it, then sends): no card links to a page without its text.
	got := strings.Join(order, ", ")
	if want := "version 1, delivery, manual, ack v1, version 2, update_card, ack v2"; got != want {
		t.Errorf("timeline = %s; want %s", got, want)
	}
	// The ledger (in the order of the facts' commits): the send, version
	// 1, who asked for the reminder and the reminder, v1's
	// acknowledgement, version 2, the update card asked for and sent,
	// v2's acknowledgement, and a page entry per page event kept, each
	// with a proof against the day's root.
	var kinds []string
	pages := 0
	for i, e := range rec.Ledger {
		if e.Kind == "page" {
			pages++ // each page event kept (link, read_to_end, acknowledged of v1 and v2)
		} else {
			kinds = append(kinds, e.Kind)
		}
		if i > 0 && e.Seq <= rec.Ledger[i-1].Seq {
			t.Errorf("ledger entries out of order: %+v", rec.Ledger)
		}
		checkProof(t, e)
		if e.Proof.Checkpoint == "" || e.Body == "" {
			t.Errorf("entry %d has no signed checkpoint or no body: %+v", e.Seq, e)
		}
	}
	if got, want := strings.Join(kinds, " "), "send version asked reminder signal version asked reminder signal"; got != want &&
		got != strings.Replace(want, "send version", "version send", 1) {
		t.Errorf("ledger entries besides page events = %s; want %s", got, want)
	}
	if pages != 6 {
		t.Errorf("ledger has %d page entries of zhangsan's; want 6 (three signals of each version)", pages)
	}

	// lisi, whom WeCom answered in unlicenseduser.
	var lisi evidence.Record
	if code := api(t, m, "GET", "/messages/"+msg+"/evidence/lisi", nil, &lisi); code != http.StatusOK || len(lisi.Deliveries) != 1 ||
		lisi.Deliveries[0].Unlicensed == nil || !*lisi.Deliveries[0].Unlicensed {
		t.Errorf("lisi's evidence = %d %+v; want unlicensed", code, lisi.Deliveries)
	}

	// The PDF.
	req, _ := http.NewRequest("GET", "http://"+m.DashboardAddr+"/api/v1/messages/"+msg+"/evidence/zhangsan.pdf", nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	pdf, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PDF = %d", resp.StatusCode)
	}
	file := filepath.Join(t.TempDir(), "zhangsan.pdf")
	testenv.Check(t, "write", os.WriteFile(file, pdf, 0o600))
	out, err := osexec(pdftotext, "-layout", file, "-")
	testenv.Check(t, "pdftotext", err)
	zone, _ := time.LoadLocation("Asia/Shanghai")
	want := []string{"张三", "zhangsan", rec.Versions[0].SHA256, rec.Versions[1].SHA256, "人力资源部",
		acks[1].In(zone).Format("2006-01-02 15:04:05"), acks[2].In(zone).Format("2006-01-02 15:04:05")}
	var cp flog.Checkpoint
	if _, err := cp.Unmarshal([]byte(rec.Checkpoint)); err != nil {
		t.Fatalf("record's checkpoint %q: %v", rec.Checkpoint, err)
	}
	want = append(want, hex.EncodeToString(cp.Hash), cp.Origin)
	if len(acks) != 2 {
		t.Fatalf("acknowledgements %v; want two", acks)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("pdftotext lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "人事部") || strings.Contains(out, "行政部") {
		t.Errorf("the PDF shows today's departments:\n%s", out)
	}

	// The ZIP of both: evidence check passes it, and fails it with
	// zhangsan's proof or PDF edited, naming the file.
	zr := getAPI(t, m, "/messages/"+msg+"/evidence.zip")
	_, vkey, err := LedgerKey(m.Config.Ledger)
	testenv.Check(t, "key", err)
	if crep, err := evidence.Check(bytes.NewReader(zr), int64(len(zr)), evidence.CheckOptions{Key: vkey}); err != nil || crep.People != 2 ||
		crep.Proofs < len(rec.Ledger) || !crep.ManifestSigned {
		t.Errorf("Check(ZIP) = %+v, %v; want 2 people, every proof verified, the manifest signed", crep, err)
	}
	for _, tc := range []struct{ file, from, to string }{
		{"zhangsan/proofs.json", `"send"`, `"sent"`},
		{"zhangsan/告知确认书.pdf", "/Producer", "/Producex"},
	} {
		edited := rewriteZIP(t, zr, tc.file, tc.from, tc.to)
		crep, err := evidence.Check(bytes.NewReader(edited), int64(len(edited)), evidence.CheckOptions{Key: vkey})
		if err == nil || !strings.Contains(strings.Join(crep.Problems, "\n"), tc.file) {
			t.Errorf("Check(ZIP with %s edited) = %v, %v; want a failure naming it", tc.file, crep.Problems, err)
		}
	}

	// 我的记录: zhangsan sees his notice; lisi's UserID in the URL is 404.
	if code, body := zs.get("/r/hr/records/zhangsan"); code != http.StatusOK || !strings.Contains(body, "考勤制度") {
		t.Errorf("zhangsan's 我的记录 = %d; want 200 with 考勤制度: %.300s", code, body)
	}
	for _, path := range []string{"/r/hr/records/lisi", "/r/hr/records/lisi/" + msg + "/evidence.pdf"} {
		if code, body := zs.get(path); code != http.StatusNotFound || strings.Contains(body, "李四") {
			t.Errorf("zhangsan GET %s = %d; want 404 and nothing of lisi's", path, code)
		}
	}

	// verify over the corp's ledger, as `yidu evidence verify` runs it.
	l, err := ledger.New(m.DB, ledger.Options{})
	testenv.Check(t, "ledger", err)
	vr, err := l.Verify(context.Background(), testCorp, "")
	testenv.Check(t, "verify", err)
	t.Logf("verify: %d entries, %d facts, problems %v", vr.Entries, vr.Facts, vr.Problems)
	if len(vr.Problems) != 0 {
		t.Errorf("verify found %d problems after a legitimate flow: %v", len(vr.Problems), vr.Problems)
	}
}

// checkProof verifies an entry's inclusion proof offline.
func checkProof(t *testing.T, e evidence.Entry) {
	t.Helper()
	if e.Proof == nil {
		t.Errorf("entry %d has no proof", e.Seq)
		return
	}
	leaf, root := unhex32(t, e.LeafHash), unhex32(t, e.Proof.Root)
	path := make([][32]byte, len(e.Proof.Path))
	for i, h := range e.Proof.Path {
		path[i] = unhex32(t, h)
	}
	if err := evidence.VerifyInclusion(leaf, e.Proof.Index, e.Proof.TreeSize, path, root); err != nil {
		t.Errorf("entry %d's proof: %v", e.Seq, err)
	}
}

func osexec(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).Output()
	return string(out), err
}

// getAPI GETs an API path with the token and returns its body (200 only).
func getAPI(t *testing.T, m *Main, path string) []byte {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+m.DashboardAddr+"/api/v1"+path, nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d: %.200s", path, resp.StatusCode, b)
	}
	return b
}

// rewriteZIP returns z with the first from in file replaced by to.
func rewriteZIP(t *testing.T, z []byte, file, from, to string) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	testenv.Check(t, "zip", err)
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	found := false
	for _, f := range zr.File {
		rc, err := f.Open()
		testenv.Check(t, "open "+f.Name, err)
		b, err := io.ReadAll(rc)
		rc.Close()
		testenv.Check(t, "read "+f.Name, err)
		if f.Name == file {
			if !bytes.Contains(b, []byte(from)) {
				t.Fatalf("%s has no %q", file, from)
			}
			b, found = bytes.Replace(b, []byte(from), []byte(to), 1), true
		}
		w, err := zw.Create(f.Name)
		testenv.Check(t, "create "+f.Name, err)
		_, err = w.Write(b)
		testenv.Check(t, "write "+f.Name, err)
	}
	testenv.Check(t, "close", zw.Close())
	if !found {
		t.Fatalf("the ZIP has no %s", file)
	}
	return out.Bytes()
}

// get GETs a page path as the member's browser.
func (rd *reader) get(path string) (int, string) {
	rd.t.Helper()
	req, _ := http.NewRequest("GET", rd.origin+path, nil)
	req.Header.Set("User-Agent", wecomUA)
	resp, err := rd.c.Do(req)
	if err != nil {
		rd.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestLedgerAPI: the corp's admin reads the newest signed checkpoint and
// a consistency proof between two from the dashboard, as JSON that yidu
// evidence check --checkpoint reads, and transparency-dev/merkle's
// verifier accepts; another corp's token is refused.
func TestLedgerAPI(t *testing.T) {
	m := mustRunMainWith(t, func(c *config.Config) {
		c.Dashboard.Tokens = append(c.Dashboard.Tokens, config.Token{Name: "other", Token: "other-token-0123456789", Corps: []string{"wwother"}})
	})
	ctx := context.Background()
	for i := range 2 {
		tx, err := m.DB.BeginTx(ctx, nil)
		testenv.Check(t, "begin", err)
		_, err = m.Ledger.Append(ctx, tx, testCorp, []ledger.Fact{ledger.Recall{MsgID: fmt.Sprintf("m%d", i), At: time.Now(), By: "t"}.Fact()})
		testenv.Check(t, "append", err)
		testenv.Check(t, "commit", tx.Commit())
		_, err = m.Ledger.Checkpoint(ctx, testCorp)
		testenv.Check(t, "checkpoint", err)
	}
	var cp struct {
		Origin string `json:"origin"`
		Size   uint64 `json:"size"`
		Root   string `json:"root"`
		Note   string `json:"checkpoint"`
	}
	if code := api(t, m, "GET", "/ledger/"+testCorp+"/checkpoint", nil, &cp); code != 200 || cp.Size != 2 || !strings.HasPrefix(cp.Note, "yidu.test/"+testCorp+"\n2\n") {
		t.Fatalf("checkpoint = %d %+v", code, cp)
	}
	var c struct {
		From, To uint64
		Old      string `json:"old_checkpoint"`
		New      string `json:"new_checkpoint"`
		Path     []string
	}
	if code := api(t, m, "GET", "/ledger/"+testCorp+"/consistency?from=1", nil, &c); code != 200 || c.From != 1 || c.To != 2 || len(c.Path) != 1 {
		t.Fatalf("consistency = %d %+v", code, c)
	}
	var old, cur flog.Checkpoint
	_, err1 := old.Unmarshal([]byte(c.Old))
	_, err2 := cur.Unmarshal([]byte(c.New))
	p, _ := hex.DecodeString(c.Path[0])
	if err1 != nil || err2 != nil || proof.VerifyConsistency(rfc6962.DefaultHasher, 1, 2, [][]byte{p}, old.Hash, cur.Hash) != nil {
		t.Errorf("consistency proof does not verify: %v %v", err1, err2)
	}
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/ledger/" + testCorp + "/consistency?from=3", 404},
		{"/ledger/" + testCorp + "/consistency?from=x", 400},
		{"/ledger/" + testCorp + "/consistency?from=2&to=1", 400},
	} {
		if code := api(t, m, "GET", tc.path, nil, nil); code != tc.want {
			t.Errorf("GET %s = %d; want %d", tc.path, code, tc.want)
		}
	}
	req, _ := http.NewRequest("GET", "http://"+m.DashboardAddr+"/api/v1/ledger/"+testCorp+"/checkpoint", nil)
	req.Header.Set("Authorization", "Bearer other-token-0123456789")
	resp, err := http.DefaultClient.Do(req)
	testenv.Check(t, "other", err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("another corp's admin = %d; want 403", resp.StatusCode)
	}
}
