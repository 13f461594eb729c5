package campaign

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
	noticev "github.com/yidu-io/yidu/notice"
)

// TestDraftContentPublished (issue 39): a scheduled notice keeps its
// full text, checked at Compose and Edit (a url of its own, an unknown
// upload: ErrInvalid, nothing written) and not published before its
// time; the Runner then publishes it as version 1 (its read rule too)
// and registers the card linked to its reading page, once however often
// it polls. A Runner that cannot publish fails such a notice rather than
// sending it without its text.
func TestDraftContentPublished(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}
	atts, err := attachment.New(db, attachment.Options{Now: c.now})
	testenv.Check(t, "attachment.New", err)
	ns, err := noticev.New(db, atts, noticev.Options{Now: c.now})
	testenv.Check(t, "notice.New", err)
	a, err := atts.Put(ctx, approvalApp.CorpID, "lisi", "评分表.pdf", strings.NewReader("%PDF-1.7\nscores"))
	testenv.Check(t, "Put", err)
	st, err := store.New(db, store.Options{Directory: bigDir{}, Apps: []yidu.App{approvalApp}, Now: c.now})
	testenv.Check(t, "store.New", err)
	page := func(app, msgID string) string { return "https://read.example.com/r/" + app + "/" + msgID }
	svc := newService(t, st, Options{Versions: ns, ReadingPage: page, Now: c.now})
	reg := &registrar{}
	run, err := loops.NewRunner(st, reg, loops.RunnerOptions{Owner: "a", Publisher: ns})
	testenv.Check(t, "NewRunner", err)
	lisi := sender("lisi")

	at := c.now().Add(time.Hour)
	n, err := svc.Compose(ctx, lisi, Compose{Draft: yidu.Draft{App: approvalApp, Title: "2026年度绩效考核办法",
		Audience: yidu.Audience{Departments: []int64{2}}, Schedule: yidu.Schedule{SendAt: at},
		Content: &yidu.NoticeContent{Markdown: "# 第四条\n\n考核周期为一年。", Attachments: []string{a.ID}, ReadRule: yidu.ReadRuleLink}}})
	testenv.Check(t, "Compose", err)
	if n.State != yidu.StateScheduled || n.Content == nil || n.Content.ReadRule != yidu.ReadRuleLink || n.URL != page("hr", n.MsgID) || n.MsgID == "" {
		t.Fatalf("composed = %+v; want scheduled, keeping its text, linked to its page", n)
	}
	for name, p := range map[string]yidu.Patch{
		"a url of its own":  {URL: new("https://intranet.example.com/1")},
		"an unknown upload": {Content: &yidu.NoticeContent{Markdown: "x", Attachments: []string{"att_nope"}}},
		"an unknown rule":   {Content: &yidu.NoticeContent{Markdown: "x", ReadRule: "glanced"}},
		"over 200 KB":       {Content: &yidu.NoticeContent{Markdown: strings.Repeat("长", 70000)}},
	} {
		if _, _, err := svc.Edit(ctx, lisi, n, p, nil); !errors.Is(err, yidu.ErrInvalid) {
			t.Errorf("Edit with %s = %v; want ErrInvalid", name, err)
		}
	}
	if got, _ := st.Get(ctx, nil, n.MsgID); !got.UpdatedAt.Equal(n.UpdatedAt) || got.Content.Markdown != n.Content.Markdown {
		t.Fatal("a refused edit wrote")
	}
	n, _, err = svc.Edit(ctx, lisi, n, yidu.Patch{Content: &yidu.NoticeContent{Markdown: "# 第四条\n\n考核周期为半年。", Attachments: []string{a.ID}, ReadRule: yidu.ReadRuleAcknowledged, MinReadSeconds: 5}}, nil)
	testenv.Check(t, "Edit", err)
	if _, err := run.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if reg.count(n.MsgID) != 0 {
		t.Fatal("sent before its time")
	}
	if _, err := ns.Get(ctx, approvalApp.CorpID, n.MsgID, 0); !errors.Is(err, noticev.ErrNotFound) {
		t.Fatalf("published before its time: %v", err)
	}

	c.add(time.Hour)
	for range 2 {
		if _, err := run.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if reg.count(n.MsgID) != 1 {
		t.Fatalf("registered %d times; want once", reg.count(n.MsgID))
	}
	if r := reg.calls[n.MsgID][0]; r.ReadRule != yidu.ReadRuleAcknowledged || r.URL != page("hr", n.MsgID) {
		t.Errorf("registration rule %q url %q; want acknowledged and the reading page", r.ReadRule, r.URL)
	}
	vs, err := ns.List(ctx, approvalApp.CorpID, n.MsgID)
	testenv.Check(t, "List", err)
	if len(vs) != 1 || !strings.Contains(vs[0].Markdown, "半年") || len(vs[0].Attachments) != 1 || vs[0].CreatedBy != "lisi" ||
		vs[0].Settings != (noticev.Settings{ReadRule: yidu.ReadRuleAcknowledged, MinReadSeconds: 5}) {
		t.Fatalf("versions = %+v; want version 1 with the edited text and its settings", vs)
	}
	if got, _ := st.Get(ctx, nil, n.MsgID); got.State != yidu.StateSent {
		t.Fatalf("state = %s; want sent", got.State)
	}

	t.Run("no publisher", func(t *testing.T) {
		bare, err := loops.NewRunner(st, reg, loops.RunnerOptions{Owner: "b"})
		testenv.Check(t, "NewRunner", err)
		m, err := svc.Compose(ctx, lisi, Compose{Draft: yidu.Draft{App: approvalApp, Title: "t", Audience: yidu.Audience{Departments: []int64{2}},
			Schedule: yidu.Schedule{Draft: true}, Content: &yidu.NoticeContent{Markdown: "x"}}})
		testenv.Check(t, "Compose", err)
		_, _, err = svc.SendNow(ctx, lisi, m)
		testenv.Check(t, "SendNow", err)
		if _, err := bare.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		got, _ := st.Get(ctx, nil, m.MsgID)
		if got.State != yidu.StateFailed || !strings.Contains(got.Reason, "content") || reg.count(m.MsgID) != 0 {
			t.Fatalf("state %s (%q), registered %d; want failed naming content, never sent", got.State, got.Reason, reg.count(m.MsgID))
		}
	})
}
