package evidence

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	flog "github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"

	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/ledger"
	"github.com/yidu-io/yidu/notice"
)

const corp = "wwevidence"

// t0 is the send; the story of the member zhangsan follows it.
var t0 = time.Date(2026, 11, 2, 1, 0, 0, 0, time.UTC)

type noAttachments struct{}

func (noAttachments) Get(context.Context, string, []string) ([]attachment.Attachment, error) {
	return nil, nil
}

// fakeLedger is a corp's log over the entries it was given (canonical
// bodies as the ledger writes them), with real RFC 6962 proofs and
// checkpoints signed with a key of the test's.
type fakeLedger struct {
	day     string
	signer  note.Signer
	vkey    string
	entries []LedgerEntry
	users   []string // users[i]: whose entry i is ("": the notice's)
	leaves  []ledger.Hash
}

func newFakeLedger(tb testing.TB, day string) *fakeLedger {
	tb.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, "yidu.test")
	if err != nil {
		tb.Fatal(err)
	}
	signer, _, err := ledger.ParseSigningKey(skey)
	if err != nil {
		tb.Fatal(err)
	}
	return &fakeLedger{day: day, signer: signer, vkey: vkey}
}

// add appends an entry of kind about user (uid; "" for the notice's)
// with the body members m.
func (l *fakeLedger) add(user string, uid uint32, kind string, m ledger.Body) {
	seq := int64(len(l.entries) + 1)
	b := ledger.Body{"corp": corp, "seq": seq, "day": l.day, "index": seq - 1, "kind": kind, "msgid": "msg1"}
	if user != "" {
		b["uid"] = uid
	}
	for k, v := range m {
		b[k] = v
	}
	body, err := ledger.Canonical(b)
	if err != nil {
		panic(err)
	}
	h := ledger.LeafHash(body)
	l.entries = append(l.entries, LedgerEntry{Seq: seq, Day: l.day, Index: seq - 1, Kind: kind, LeafHash: h, Body: body})
	l.users = append(l.users, user)
	l.leaves = append(l.leaves, h)
}

func (l *fakeLedger) EntriesFor(_ context.Context, _, _, userid string) ([]LedgerEntry, error) {
	var out []LedgerEntry
	for i, e := range l.entries {
		if l.users[i] == userid || l.users[i] == "" {
			out = append(out, e)
		}
	}
	return out, nil
}

func (l *fakeLedger) checkpoint() (ledger.Hash, string) {
	root := ledger.Root(l.leaves)
	text := flog.Checkpoint{Origin: ledger.Origin("yidu.test", corp), Size: uint64(len(l.leaves)), Hash: root[:]}.Marshal()
	signed, err := note.Sign(&note.Note{Text: string(text)}, l.signer)
	if err != nil {
		panic(err)
	}
	return root, string(signed)
}

func (l *fakeLedger) Checkpoint(context.Context, string) (string, error) {
	_, n := l.checkpoint()
	return n, nil
}

func (l *fakeLedger) Prove(_ context.Context, _ string, seq int64) (Proof, error) {
	root, n := l.checkpoint()
	path, err := ledger.NewTree(l.leaves).Inclusion(uint64(seq-1), uint64(len(l.leaves)))
	if err != nil {
		return Proof{}, err
	}
	p := Proof{Index: seq - 1, TreeSize: int64(len(l.leaves)), Root: root, Checkpoint: n}
	for _, h := range path {
		p.Path = append(p.Path, h)
	}
	return p, nil
}

// fakePage stands for the reading page's own records (issue 39): the
// re-acknowledgement of version 2 with its IP and User-Agent.
type fakePage map[uint32][]Signal

func (p fakePage) PageEvents(_ context.Context, _, _ string, uid uint32) ([]Signal, error) {
	return p[uid], nil
}

// only is a Scope of some uids (a leader's people).
type only map[uint32]bool

func (o only) Contains(uid uint32) bool { return o[uid] }

type everyone struct{}

func (everyone) Contains(uint32) bool { return true }

func mustExec(tb testing.TB, db *sql.DB, q string, args ...any) {
	tb.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		tb.Fatalf("%s: %v", q, err)
	}
}

// fixture is a notice "msg1" to n people in departments 2 (uids 1..n/2,
// led by the leader) and 3 (the rest); uid 1 is 张三 (zhangsan).
type fixture struct {
	db       *sql.DB
	versions *notice.Store
	ledger   *fakeLedger
	page     fakePage
	v1, v2   notice.Version
}

func newFixture(tb testing.TB, n int) *fixture {
	tb.Helper()
	db := testenv.MySQL(tb)
	ctx := context.Background()
	clock := t0.Add(-time.Hour)
	vs, err := notice.New(db, noAttachments{}, notice.Options{Now: func() time.Time { return clock }})
	if err != nil {
		tb.Fatal(err)
	}
	f := &fixture{db: db, versions: vs, ledger: newFakeLedger(tb, "2026-11-02"), page: fakePage{}}
	mustExec(tb, db, `INSERT INTO departments (corp_id, dept_id, parent_id, name) VALUES (?, 1, 0, '总部'), (?, 2, 1, '人力资源部'), (?, 3, 1, '销售部')`, corp, corp, corp)
	mustExec(tb, db, `INSERT INTO messages (corp_id, msgid, app, agent_id, title, sent_at, recipient_count, audience_hash, state)
		VALUES (?, 'msg1', 'hr', 1000002, '员工考勤管理制度（2026 修订）', ?, ?, '', 1)`, corp, t0, n)
	var users, members, records bytes.Buffer
	for uid := 1; uid <= n; uid++ {
		userid, name, dept := fmt.Sprintf("user%05d", uid), fmt.Sprintf("员工%d", uid), 2
		if uid == 1 {
			userid, name = "zhangsan", "张三"
		}
		if uid > n/2 {
			dept = 3
		}
		sep := ","
		if uid == 1 {
			sep = ""
		}
		fmt.Fprintf(&users, "%s('%s', %d, '%s', '%s', '%d')", sep, corp, uid, userid, name, dept)
		fmt.Fprintf(&members, "%s('%s', %d, %d)", sep, corp, dept, uid)
		fmt.Fprintf(&records, "%s('%s', 'msg1', %d)", sep, corp, uid)
		f.ledger.add(userid, uint32(uid), "send", ledger.Body{"userid": userid, "batch": int64((uid - 1) / sendBatch), "at": t0.Format(time.RFC3339),
			"errcode": int64(0), "wecom_msgid": fmt.Sprintf("wxmsg-%d", (uid-1)/sendBatch), "invalid": false})
	}
	mustExec(tb, db, `INSERT INTO users (corp_id, uid, userid, name, departments) VALUES `+users.String())
	mustExec(tb, db, `INSERT INTO user_departments (corp_id, dept_id, uid) VALUES `+members.String())
	mustExec(tb, db, `INSERT INTO message_read_record (corp_id, msgid, uid) VALUES `+records.String())
	for b := 0; b*sendBatch < n; b++ {
		mustExec(tb, db, `INSERT INTO message_sends (corp_id, msgid, kind, batch, status, errcode, wecom_msgid, sent_at, users)
			VALUES (?, 'msg1', 'send', ?, 'sent', 0, ?, ?, 1000)`, corp, b, fmt.Sprintf("wxmsg-%d", b), t0)
	}
	// v1 as sent; v2 published as material two days later.
	p, err := vs.Prepare(ctx, corp, notice.Draft{Title: "员工考勤管理制度", Markdown: "第一条 上班时间为 9:00。"})
	if err != nil {
		tb.Fatal(err)
	}
	if f.v1, err = vs.Create(ctx, corp, "msg1", p, notice.Settings{}, "hr-admin"); err != nil {
		tb.Fatal(err)
	}
	clock = t0.Add(48 * time.Hour)
	p, err = vs.Prepare(ctx, corp, notice.Draft{Title: "员工考勤管理制度", Markdown: "第一条 上班时间为 8:30。"})
	if err != nil {
		tb.Fatal(err)
	}
	if f.v2, _, err = vs.Update(ctx, corp, "msg1", p, true, "hr-admin"); err != nil {
		tb.Fatal(err)
	}
	// zhangsan: reminded once (round 1), opened and acknowledged v1, then
	// re-acknowledged v2 on the reading page.
	mustExec(tb, db, `INSERT INTO reminder_log (corp_id, msgid, round, kind, uid, userid, batch, reminded_at, outcome)
		VALUES (?, 'msg1', 1, 'reminder', 1, 'zhangsan', 0, ?, 'sent')`, corp, t0.Add(2*time.Hour))
	mustExec(tb, db, `UPDATE message_read_record SET is_read = 1, read_time = ?, source = 1, link_at = ?, button_at = ?
		WHERE corp_id = ? AND msgid = 'msg1' AND uid = 1`, t0.Add(3*time.Hour+5*time.Minute), t0.Add(3*time.Hour), t0.Add(3*time.Hour+5*time.Minute), corp)
	f.page[1] = []Signal{{Kind: "acknowledged", At: t0.Add(49 * time.Hour), Version: 2, Source: "page", ClientIP: "10.1.2.3", UserAgent: "wxwork/4.1"}}
	// The ledger's entries of all that, as the ledger writes them.
	for _, v := range []notice.Version{f.v1, f.v2} {
		f.ledger.add("", 0, "version", ledger.Body{"version": int64(v.N), "sha256": v.SHA256.String(), "reacknowledge": v.Reacknowledge,
			"at": v.CreatedAt.UTC().Format(time.RFC3339), "by": "hr-admin"})
	}
	f.ledger.add("zhangsan", 1, "seen", ledger.Body{"signal": "link", "at": t0.Add(3 * time.Hour).Format(time.RFC3339)})
	f.ledger.add("zhangsan", 1, "signal", ledger.Body{"source": int64(1), "read_time": t0.Add(3*time.Hour + 5*time.Minute).Format(time.RFC3339)})
	f.ledger.add("zhangsan", 1, "page", ledger.Body{"source": int64(6), "signal": "acknowledged", "version": int64(2),
		"read_time": t0.Add(49 * time.Hour).Format(time.RFC3339), "ip": "10.1.2.3", "ua": "wxwork/4.1"})
	return f
}

func (f *fixture) service(tb testing.TB, withLedger bool) *Service {
	tb.Helper()
	opts := Options{PageEvents: f.page, Now: func() time.Time { return t0.Add(72 * time.Hour) }}
	if withLedger {
		opts.Ledger, opts.Signer, opts.VerifierKey = f.ledger, f.ledger.signer, f.ledger.vkey
	}
	s, err := New(f.db, f.versions, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// TestRecordInOrder: one member sent v1, reminded once, opened and
// acknowledged v1, v2 published as material, re-acknowledged: the record
// has all of it, in order, with the right versions.
func TestRecordInOrder(t *testing.T) {
	f := newFixture(t, 4)
	s := f.service(t, true)
	rec, err := s.Record(context.Background(), everyone{}, corp, "msg1", "zhangsan")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Person.Name != "张三" || rec.Person.UserID != "zhangsan" || len(rec.Person.Departments) != 1 || rec.Person.Departments[0].Name != "人力资源部" {
		t.Errorf("Person = %+v", rec.Person)
	}
	if len(rec.Versions) != 2 || rec.Versions[0].SHA256 != f.v1.SHA256.String() || rec.Versions[1].SHA256 != f.v2.SHA256.String() || !rec.Versions[1].Reacknowledge {
		t.Errorf("Versions = %+v", rec.Versions)
	}
	if len(rec.Deliveries) != 1 || rec.Deliveries[0].WeComMsgID != "wxmsg-0" || rec.Deliveries[0].Version != 1 || rec.Deliveries[0].Status != "sent" {
		t.Errorf("Deliveries = %+v", rec.Deliveries)
	}
	var got []string
	for _, e := range rec.Timeline {
		got = append(got, fmt.Sprintf("%s v%d %s", e.At.Sub(t0), e.Version, e.Kind))
	}
	want := []string{"-1h0m0s v1 version", "0s v1 delivery", "2h0m0s v0 follow_up", "3h0m0s v1 signal", "3h5m0s v1 signal",
		"48h0m0s v2 version", "49h0m0s v2 signal"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("Timeline =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	kinds := []string{}
	for _, sg := range rec.Signals {
		kinds = append(kinds, fmt.Sprintf("%s/%s/v%d/%v", sg.Kind, sg.Source, sg.Version, sg.CountedAsRead))
	}
	if w := "link/page/v1/false button/card/v1/true acknowledged/page/v2/false"; strings.Join(kinds, " ") != w {
		t.Errorf("Signals = %s; want %s", strings.Join(kinds, " "), w)
	}
	if !rec.LedgerConnected || len(rec.Ledger) != 6 || rec.Ledger[0].Proof == nil || rec.Ledger[0].Body == "" || !strings.Contains(rec.Checkpoint, "\n\n— yidu.test ") {
		t.Errorf("Ledger = %+v checkpoint %q; want zhangsan's 6 entries with bodies, and the signed checkpoint", rec.Ledger, rec.Checkpoint)
	}
	if _, err := json.Marshal(rec); err != nil {
		t.Fatal(err)
	}
}

func TestRecordNotFound(t *testing.T) {
	f := newFixture(t, 4)
	s := f.service(t, false)
	ctx := context.Background()
	tests := []struct {
		name         string
		scope        Scope
		msgid, userd string
	}{
		{"outside the leader's scope", only{2: true}, "msg1", "zhangsan"},
		{"not a user", everyone{}, "msg1", "nobody"},
		{"bad userid", everyone{}, "msg1", "../x"},
		{"no notice", everyone{}, "msg2", "zhangsan"},
		{"nil scope", nil, "msg1", "zhangsan"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.Record(ctx, tt.scope, corp, tt.msgid, tt.userd); !errors.Is(err, ErrNotFound) {
				t.Errorf("Record = %v; want ErrNotFound", err)
			}
		})
	}
}

// TestPDFText: pdftotext of the PDF shows the name, the UserID, both
// version hashes, the acknowledgement times and the day's root; without
// a ledger it says 未接入账本.
func TestPDFText(t *testing.T) {
	pdftotext := testenv.LookPath(t, "pdftotext")
	f := newFixture(t, 4)
	for _, withLedger := range []bool{true, false} {
		t.Run(fmt.Sprintf("ledger=%v", withLedger), func(t *testing.T) {
			s := f.service(t, withLedger)
			rec, err := s.Record(context.Background(), everyone{}, corp, "msg1", "zhangsan")
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := s.PDF(&buf, rec); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "e.pdf")
			if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(pdftotext, "-layout", file, "-").Output()
			if err != nil {
				t.Fatalf("pdftotext: %v", err)
			}
			text := string(out)
			want := []string{"告知确认书", "张三", "zhangsan", f.v1.SHA256.String(), f.v2.SHA256.String(),
				"2026-11-02 12:05:00", // the button, 04:05 UTC in Beijing time
				"2026-11-04 10:00:00", // the re-acknowledgement of v2
				"人力资源部", "10.1.2.3"}
			if withLedger {
				root, _ := f.ledger.checkpoint()
				want = append(want, root.String(), "yidu.test/"+corp, fmt.Sprintf("条目数 %d", len(f.ledger.leaves)))
			} else {
				want = append(want, "未接入账本")
			}
			for _, w := range want {
				if !strings.Contains(text, w) {
					t.Errorf("pdftotext lacks %q:\n%s", w, text)
				}
			}
			if n := strings.Count(text, "\f"); n != 1 {
				t.Errorf("PDF has %d pages; want 1", n)
			}
		})
	}
}

// TestPDFRareName: a name outside GB 2312 (喆) is in the font and
// extracts, from a single PDF and from a ZIP's shared font cut.
func TestPDFRareName(t *testing.T) {
	pdftotext := testenv.LookPath(t, "pdftotext")
	s := &Service{zone: time.UTC}
	rec := Record{MsgID: "m", Person: Person{UserID: "wangzhe", Name: "王喆"}}
	for _, fc := range []*fontCache{nil, newFontCache("张三")} {
		var buf bytes.Buffer
		if err := s.pdf(&buf, rec, fc); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "e.pdf")
		_ = os.WriteFile(file, buf.Bytes(), 0o600)
		out, err := exec.Command(pdftotext, file, "-").Output()
		if err != nil || !strings.Contains(string(out), "王喆") || !strings.Contains(string(out), "未接入账本") {
			t.Errorf("pdftotext = %q, %v; want 王喆 and 未接入账本", out, err)
		}
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestReceived: 我的记录's list is the member's notices with their signals.
func TestReceived(t *testing.T) {
	f := newFixture(t, 3)
	s := f.service(t, false)
	got, err := s.Received(context.Background(), corp, "zhangsan")
	if err != nil {
		t.Fatal(err)
	}
	// The page's acknowledgement is there too, in time order (issue 49:
	// 我的记录 showed 已打开 of a notice acknowledged on its page).
	var kinds []string
	for _, sg := range got[0].Signals {
		kinds = append(kinds, sg.Kind)
	}
	if len(got) != 1 || got[0].MsgID != "msg1" || !got[0].Read || strings.Join(kinds, ",") != "link,button,acknowledged" || !got[0].Has("acknowledged") {
		t.Errorf("Received = %+v; want signals link, button, acknowledged", got)
	}
	if got, err := s.Received(context.Background(), corp, "nobody"); err != nil || len(got) != 0 {
		t.Errorf("Received(nobody) = %+v, %v", got, err)
	}
}

// TestRecordAtSend: the departments are the send's, not today's (the
// member moved and the department was renamed since); WeCom's
// unlicenseduser and the update card of version 2 are in the record and
// on the PDF. A notice whose send kept no departments says "current".
func TestRecordAtSend(t *testing.T) {
	pdftotext := testenv.LookPath(t, "pdftotext")
	f := newFixture(t, 4)
	uids := roaring.BitmapOf(1, 3)
	ub, err := uids.ToBytes()
	testenv.Check(t, "bitmap", err)
	mustExec(t, f.db, `INSERT INTO send_departments (corp_id, msgid, set_no, taken_at, depts, names, uids) VALUES (?, 'msg1', 0, ?, '1,3', ?, ?)`,
		corp, t0, `{"1":"总部","3":"销售一部"}`, ub)
	mustExec(t, f.db, `UPDATE message_sends SET unlicensed = 'ZhangSan|user00002' WHERE corp_id = ? AND msgid = 'msg1'`, corp)
	mustExec(t, f.db, `INSERT INTO manual_reminders (corp_id, msgid, uid, reminded_at, reminded_by, scope) VALUES (?, 'msg1', 1, ?, 'hr-admin', 'reack:v2')`,
		corp, t0.Add(48*time.Hour+time.Minute))
	s := f.service(t, true)
	rec, err := s.Record(context.Background(), everyone{}, corp, "msg1", "zhangsan")
	testenv.Check(t, "Record", err)
	p := rec.Person
	if p.DepartmentsAsOf != "send" || p.DepartmentsAt == nil || !p.DepartmentsAt.Equal(t0) || fmt.Sprint(p.Departments) != "[{1 总部} {3 销售一部}]" {
		t.Errorf("Person = %+v; want departments 总部 and 销售一部 as of the send", p)
	}
	if len(rec.Deliveries) != 1 || rec.Deliveries[0].Unlicensed == nil || !*rec.Deliveries[0].Unlicensed {
		t.Errorf("Deliveries = %+v; want unlicensed", rec.Deliveries)
	}
	if n := len(rec.FollowUps); n != 2 || rec.FollowUps[1].Kind != "update_card" || rec.FollowUps[1].Version != 2 {
		t.Errorf("FollowUps = %+v; want the reminder, then version 2's update card", rec.FollowUps)
	}
	var buf bytes.Buffer
	testenv.Check(t, "PDF", s.PDF(&buf, rec))
	file := filepath.Join(t.TempDir(), "e.pdf")
	testenv.Check(t, "write", os.WriteFile(file, buf.Bytes(), 0o600))
	out, err := exec.Command(pdftotext, "-layout", file, "-").Output()
	testenv.Check(t, "pdftotext", err)
	for _, w := range []string{"发送时部门：总部、销售一部", "2026-11-02 09:00:00 发送时的通讯录", "未获许可（unlicenseduser）", "版本 2 更新卡片"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("pdftotext lacks %q:\n%s", w, out)
		}
	}
	// user00002 is in the set of no snapshot row: today's directory.
	rec, err = s.Record(context.Background(), everyone{}, corp, "msg1", "user00002")
	testenv.Check(t, "Record", err)
	if rec.Person.DepartmentsAsOf != "current" || rec.Person.DepartmentsAt != nil || len(rec.Person.Departments) != 1 || rec.Person.Departments[0].Name != "人力资源部" {
		t.Errorf("Person without a snapshot = %+v; want today's 人力资源部, current", rec.Person)
	}
}

// TestPDFRootsWhenFull: a member with more signals than one page holds
// still gets the day's roots and the closing note on their PDF (the roots
// were left out as overflow before); what is left out is said.
func TestPDFRootsWhenFull(t *testing.T) {
	pdftotext := testenv.LookPath(t, "pdftotext")
	s := &Service{zone: time.UTC}
	at := time.Date(2026, 12, 4, 1, 0, 0, 0, time.UTC)
	root := strings.Repeat("ab", 32)
	rb, _ := hex.DecodeString(root)
	rec := Record{MsgID: "m", Person: Person{UserID: "zhangsan", Name: "张三"}, LedgerConnected: true,
		Checkpoint: string(flog.Checkpoint{Origin: "yidu.test/wwevidence", Size: 60, Hash: rb}.Marshal())}
	for i := range 60 {
		rec.Signals = append(rec.Signals, Signal{Kind: "acknowledged", At: at.Add(time.Duration(i) * time.Minute), Version: i + 1,
			Source: "page", ClientIP: "203.0.113.9", UserAgent: "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) wxwork/4.1.22"})
		rec.Ledger = append(rec.Ledger, Entry{Seq: int64(i + 1), Day: "2026-12-04", Index: int64(i), Kind: "page"})
	}
	var buf bytes.Buffer
	testenv.Check(t, "PDF", s.PDF(&buf, rec))
	file := filepath.Join(t.TempDir(), "e.pdf")
	testenv.Check(t, "write", os.WriteFile(file, buf.Bytes(), 0o600))
	out, err := exec.Command(pdftotext, "-layout", file, "-").Output()
	testenv.Check(t, "pdftotext", err)
	for _, w := range []string{root, "yidu.test/wwevidence", "yidu evidence check", "未能印在本页", "张三"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("pdftotext lacks %q:\n%s", w, out)
		}
	}
	if n, err := exec.Command("pdfinfo", file).Output(); err == nil && !regexp.MustCompile(`Pages:\s+1\n`).Match(n) {
		t.Errorf("pdfinfo: %s; want one page", n)
	}
}

// TestPDFLinesChinese: the 告知确认书 speaks the glossary's words: the
// page's acknowledgement is 已确认知悉 and the card's press 已点击「我已阅读」,
// a follow-up's outcome and a ledger entry's kind are Chinese, and no
// repository path is printed (issue 49).
func TestPDFLinesChinese(t *testing.T) {
	s := &Service{zone: time.UTC}
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	rec := Record{MsgID: "m", Title: "t", SentAt: at, Person: Person{UserID: "zhangsan"},
		Signals:         []Signal{{Kind: "button", At: at, Source: "card"}, {Kind: "acknowledged", At: at, Source: "page", Version: 1}},
		FollowUps:       []FollowUp{{Kind: "manual", Outcome: "sent", At: at}},
		LedgerConnected: true, Ledger: []Entry{{Seq: 7, Day: "2026-12-03", Index: 2, Kind: "send"}}}
	var all []string
	for _, l := range s.pdfLines(rec) {
		all = append(all, l.text+l.value)
	}
	text := strings.Join(all, "\n")
	for _, want := range []string{"已点击「我已阅读」", "已确认知悉", "提醒未读　已发出", "6 发送"} {
		if !strings.Contains(text, want) {
			t.Errorf("the PDF lacks %q:\n%s", want, text)
		}
	}
	for _, bad := range []string{"docs/", " sent", " send"} {
		if strings.Contains(text, bad) {
			t.Errorf("the PDF holds %q:\n%s", bad, text)
		}
	}
}

// TestNameAtSend: the log's send entry keeps the member's name at send
// (issue 48); the record carries it and the PDF prints it first when the
// directory names them otherwise now, so an edit of users.name (or a
// rename) cannot change whom the notice reached.
func TestNameAtSend(t *testing.T) {
	l := newFakeLedger(t, "2026-12-03")
	l.add("zhangsan", 1, "send", ledger.Body{"userid": "zhangsan", "name": "张三"})
	s := &Service{ledger: l, zone: time.UTC}
	rec := Record{CorpID: corp, MsgID: "msg1", Person: Person{UID: 1, UserID: "zhangsan", Name: "张三丰"}}
	if err := s.ledgerEntries(context.Background(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Person.NameAtSend != "张三" {
		t.Fatalf("NameAtSend = %q; want 张三 (the send entry's)", rec.Person.NameAtSend)
	}
	var all []string
	for _, ln := range s.pdfLines(rec) {
		all = append(all, ln.text+ln.value)
	}
	if text := strings.Join(all, "\n"); !strings.Contains(text, "姓名：张三（发送时姓名；现为 张三丰）") {
		t.Errorf("the PDF does not print the name at send first:\n%s", text)
	}
}
