package notice

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/content"
	"github.com/yidu-io/yidu/internal/testenv"
)

const corp = "wx5823bf96d3bd56c7"

func newStore(t *testing.T) (*Store, *attachment.Store) {
	t.Helper()
	db := testenv.MySQL(t)
	now := func() time.Time { return time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC) }
	atts, err := attachment.New(db, attachment.Options{Now: now})
	testenv.Check(t, "attachment.New", err)
	s, err := New(db, atts, Options{Now: now})
	testenv.Check(t, "notice.New", err)
	return s, atts
}

func upload(t *testing.T, atts *attachment.Store, corp, body string) attachment.Attachment {
	t.Helper()
	a, err := atts.Put(context.Background(), corp, "hr", "评分表.pdf", strings.NewReader("%PDF-1.7\n"+body))
	testenv.Check(t, "Put", err)
	return a
}

func TestPrepare(t *testing.T) {
	s, atts := newStore(t)
	ctx := context.Background()
	a := upload(t, atts, corp, "a")
	other := upload(t, atts, "wwothercorp", "b")

	v, err := s.Prepare(ctx, corp, Draft{Title: "绩效考核办法", Markdown: "# 第一条\n\n<script>x</script>", Attachments: []string{a.ID}})
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	if strings.Contains(v.HTML, "script") || !strings.Contains(v.HTML, "第一条</h1>") {
		t.Fatalf("HTML = %q", v.HTML)
	}
	if want := content.VersionHash("绩效考核办法", v.HTML, []content.Hash{a.Hash()}); v.SHA256 != want {
		t.Fatalf("SHA256 = %s; want %s", v.SHA256, want)
	}

	eleven := make([]string, content.MaxAttachments+1)
	for i := range eleven {
		eleven[i] = fmt.Sprintf("att_%d", i)
	}
	for name, d := range map[string]Draft{
		"another corp's upload": {Title: "t", Attachments: []string{other.ID}},
		"unknown upload":        {Title: "t", Attachments: []string{"att_nope"}},
		"twice":                 {Title: "t", Attachments: []string{a.ID, a.ID}},
		"eleven":                {Title: "t", Attachments: eleven},
		"too long":              {Title: "t", Markdown: strings.Repeat("x", content.MaxMarkdown+1)},
	} {
		if _, err := s.Prepare(ctx, corp, d); !errors.Is(err, yidu.ErrInvalid) {
			t.Errorf("%s: Prepare = %v; want ErrInvalid", name, err)
		}
	}
}

func TestVersions(t *testing.T) {
	s, atts := newStore(t)
	ctx := context.Background()
	a := upload(t, atts, corp, "scores")
	prep := func(md string, ids ...string) Version {
		v, err := s.Prepare(ctx, corp, Draft{Title: "绩效考核办法", Markdown: md, Attachments: ids})
		testenv.Check(t, "Prepare", err)
		return v
	}
	set := Settings{ReadRule: yidu.ReadRuleAcknowledged, MinReadSeconds: 10}
	v1, err := s.Create(ctx, corp, "perf", prep("第四条 一年", a.ID), set, "hr")
	if err != nil || v1.N != 1 {
		t.Fatalf("Create = %+v, %v", v1, err)
	}
	// The same POST again: the stored version; other content: conflict.
	if again, err := s.Create(ctx, corp, "perf", prep("第四条 一年", a.ID), set, "hr"); err != nil || again.SHA256 != v1.SHA256 {
		t.Fatalf("Create again = %+v, %v", again, err)
	}
	if _, err := s.Create(ctx, corp, "perf", prep("第四条 两年"), set, "hr"); !errors.Is(err, yidu.ErrConflict) {
		t.Fatalf("Create of other content = %v; want ErrConflict", err)
	}

	// Unchanged content makes no version.
	if cur, made, err := s.Update(ctx, corp, "perf", prep("第四条 一年", a.ID), true, "hr"); err != nil || made || cur.N != 1 {
		t.Fatalf("Update with the same content = v%d, %v, %v; want v1, false", cur.N, made, err)
	}
	v2, made, err := s.Update(ctx, corp, "perf", prep("第四条 半年", a.ID), true, "hr2")
	if err != nil || !made || v2.N != 2 || !v2.Reacknowledge || v2.Settings != set {
		t.Fatalf("Update = %+v, %v, %v", v2, made, err)
	}
	v3, _, err := s.Update(ctx, corp, "perf", prep("第四条 半年（错别字已改）", a.ID), false, "hr")
	testenv.Check(t, "Update", err)

	// Every version stays readable as it was.
	got1, err := s.Get(ctx, corp, "perf", 1)
	if err != nil || got1.Markdown != "第四条 一年" || got1.SHA256 != v1.SHA256 || len(got1.Attachments) != 1 || got1.Attachments[0] != a {
		t.Fatalf("Get v1 = %+v, %v", got1, err)
	}
	if cur, err := s.Get(ctx, corp, "perf", 0); err != nil || cur.N != 3 || cur.SHA256 != v3.SHA256 {
		t.Fatalf("Get current = v%d, %v; want v3", cur.N, err)
	}
	if _, err := s.Get(ctx, corp, "perf", 4); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get v4 = %v; want ErrNotFound", err)
	}
	list, err := s.List(ctx, corp, "perf")
	if err != nil || len(list) != 3 {
		t.Fatalf("List = %d versions, %v", len(list), err)
	}
	if m := Material(list); m != 2 {
		t.Fatalf("Material = %d; want 2 (v3 was not material)", m)
	}
	if _, _, err := s.Update(ctx, corp, "nosuch", prep("x"), false, "hr"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Update of a notice without content = %v; want ErrNotFound", err)
	}
}

// TestUpdateConcurrent: editors at once each get their own N.
func TestUpdateConcurrent(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	v, err := s.Prepare(ctx, corp, Draft{Title: "t", Markdown: "v1"})
	testenv.Check(t, "Prepare", err)
	_, err = s.Create(ctx, corp, "c", v, Settings{}, "hr")
	testenv.Check(t, "Create", err)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			v, _ := s.Prepare(ctx, corp, Draft{Title: "t", Markdown: fmt.Sprintf("edit %d", i)})
			if _, _, err := s.Update(ctx, corp, "c", v, false, "hr"); err != nil {
				t.Errorf("Update: %v", err)
			}
		})
	}
	wg.Wait()
	list, err := s.List(ctx, corp, "c")
	if err != nil || len(list) != 9 {
		t.Fatalf("List = %d versions, %v; want 9", len(list), err)
	}
	for i, v := range list {
		if v.N != i+1 {
			t.Fatalf("version %d is numbered %d", i+1, v.N)
		}
	}
}
