package page

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/evidence"
)

// fakeRecords: zhangsan received "perf" and acknowledged it; lisi
// received "other".
type fakeRecords struct{}

func (fakeRecords) Received(_ context.Context, c, userid string) ([]evidence.Received, error) {
	at := time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)
	switch userid {
	case "zhangsan":
		return []evidence.Received{{MsgID: "perf", Title: "2026年度绩效考核办法", SentAt: at, Read: true, ReadTime: &at,
			Signals: []evidence.Signal{{Kind: "button", At: at.Add(time.Hour)}}},
			{MsgID: "handbook", Title: "员工手册确认", SentAt: at, Read: true, ReadTime: &at,
				Signals: []evidence.Signal{{Kind: "link", At: at}, {Kind: "read_to_end", At: at.Add(time.Minute)}, {Kind: "acknowledged", At: at.Add(2 * time.Minute)}}}}, nil
	case "lisi":
		return []evidence.Received{{MsgID: "other", Title: "李四的通知", SentAt: at}}, nil
	}
	return nil, nil
}

func (fakeRecords) Record(_ context.Context, scope evidence.Scope, c, msgid, userid string) (evidence.Record, error) {
	if (userid == "zhangsan" && msgid == "perf") || (userid == "lisi" && msgid == "other") {
		return evidence.Record{MsgID: msgid, Person: evidence.Person{UserID: userid}}, nil
	}
	return evidence.Record{}, evidence.ErrNotFound
}

func (fakeRecords) PDF(w io.Writer, rec evidence.Record) error {
	_, err := fmt.Fprintf(w, "%%PDF-1.4 %s %s", rec.Person.UserID, rec.MsgID)
	return err
}

// TestRecords is 我的记录: a signed-in member sees their notices and
// downloads their own 告知确认书; another member's UserID in the URL is
// 404 with an audit row, and nothing of theirs shows.
func TestRecords(t *testing.T) {
	f := newFixture(t)
	b := &browser{f: f, ua: wecomUA, cookies: map[string]*http.Cookie{}}
	if w := b.signIn(t, "/r/hr/records/zhangsan", "zhangsan"); w.Code != 302 || w.Header().Get("Location") != "/r/hr/records/zhangsan" {
		t.Fatalf("sign-in return = %d %q; want 302 back to 我的记录", w.Code, w.Header().Get("Location"))
	}
	w := b.get(t, "/r/hr/records/zhangsan")
	body := w.Body.String()
	if w.Code != 200 {
		t.Fatalf("records = %d: %s", w.Code, body)
	}
	for _, want := range []string{"我的记录", "2026年度绩效考核办法", "已读", "2026-12-02 11:00:00 已点击「我已阅读」", `href="zhangsan/perf/evidence.pdf"`,
		// Issue 49: read to the end and acknowledged is 已确认知悉, not 已打开.
		`class="state">已确认知悉</td>`, "2026-12-02 10:02:00 已确认知悉"} {
		if !strings.Contains(body, want) {
			t.Errorf("records lack %q:\n%s", want, body)
		}
	}
	w = b.get(t, "/r/hr/records/zhangsan/perf/evidence.pdf")
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/pdf" || w.Body.String() != "%PDF-1.4 zhangsan perf" {
		t.Errorf("own PDF = %d %q %q", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	evidenceRows := 0
	for _, e := range f.audit.events {
		if e.Action == yidu.ActionEvidence && e.Actor == "zhangsan" {
			evidenceRows++
		}
	}
	if evidenceRows != 3 {
		t.Errorf("audit evidence rows of zhangsan = %d; want 3 (the list, the PDF started and ended)", evidenceRows)
	}
	for _, target := range []string{"/r/hr/records/lisi", "/r/hr/records/lisi/other/evidence.pdf", "/r/hr/records/zhangsan/other/evidence.pdf",
		"/r/hr/records/..%2Flisi", "/r/nope/records/zhangsan"} {
		before := len(f.audit.events)
		w := b.get(t, target)
		if w.Code != 404 || strings.Contains(w.Body.String(), "李四") || strings.Contains(w.Body.String(), "PDF") {
			t.Errorf("GET %s = %d %q; want 404 and nothing of lisi's", target, w.Code, w.Body)
		}
		if strings.HasPrefix(target, "/r/hr/records/lisi") && (len(f.audit.events) != before+1 || f.audit.events[before].Action != yidu.ActionPageDenied) {
			t.Errorf("GET %s left audit %v; want one page_denied row", target, f.audit.events[before:])
		}
	}
	// Without a session: the sign-in, not the list.
	anon := &browser{f: f, ua: wecomUA, cookies: map[string]*http.Cookie{}}
	if w := anon.get(t, "/r/hr/records/zhangsan"); w.Code != 302 || strings.Contains(w.Body.String(), "绩效") {
		t.Errorf("records without a session = %d; want 302 to the sign-in", w.Code)
	}
}
