package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestTemplates: a template is stored with all its fields, listed for
// its app only (newest change first), changed with its version counted,
// and once deleted neither listed nor read; a template of an app not
// configured is not found.
func TestTemplates(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	c := newClock()
	other := yidu.App{Name: "it", CorpID: "ww1", AgentID: 1000003}
	ts := store.NewTemplates(db, []yidu.App{testApp, other}, c.now)
	full := yidu.Template{App: testApp, Name: "考勤", Title: "新考勤制度", Body: "请阅读", URL: "https://example.com/a",
		Audience: yidu.Audience{Departments: []int64{2}}, Markdown: "# 考勤", Attachments: []string{"up1", "up2"},
		ReadRule: yidu.ReadRuleAcknowledged, MinReadSeconds: 30}
	id1, err := ts.Create(ctx, full, "hr-admin")
	testenv.Check(t, "Create", err)
	c.add(time.Second)
	id2, err := ts.Create(ctx, yidu.Template{App: testApp, Name: "年假", Title: "年假", Audience: yidu.Audience{All: true}}, "hr-admin")
	testenv.Check(t, "Create", err)
	_, err = ts.Create(ctx, yidu.Template{App: other, Name: "IT", Title: "停机"}, "it-admin")
	testenv.Check(t, "Create other app", err)

	got, err := ts.Get(ctx, id1)
	testenv.Check(t, "Get", err)
	if got.Name != full.Name || got.Title != full.Title || got.Body != full.Body || got.URL != full.URL || got.Markdown != full.Markdown ||
		len(got.Attachments) != 2 || got.Attachments[1] != "up2" || got.ReadRule != full.ReadRule || got.MinReadSeconds != 30 ||
		len(got.Audience.Departments) != 1 || got.App.Name != testApp.Name || got.App.AgentID != testApp.AgentID || got.CreatedBy != "hr-admin" || !got.CreatedAt.Equal(t0) {
		t.Errorf("Get = %+v; want the template as created (%+v)", got, full)
	}

	list := func() []int64 {
		t.Helper()
		l, err := ts.List(ctx, testApp)
		testenv.Check(t, "List", err)
		var ids []int64
		for _, tpl := range l {
			ids = append(ids, tpl.ID)
		}
		return ids
	}
	c.add(time.Second)
	changed := full
	changed.Name, changed.Title = "考勤 v2", "新考勤制度（修订）"
	testenv.Check(t, "Update", ts.Update(ctx, id1, changed, "hr-lead"))
	tests := []struct {
		name   string
		act    func() error
		wantID []int64
	}{
		{"the changed one first", func() error { return nil }, []int64{id1, id2}},
		{"deleted one gone", func() error { return ts.Delete(ctx, id2, "hr-lead") }, []int64{id1}},
		{"an update of the deleted one stays deleted", func() error { return ts.Update(ctx, id2, full, "hr-lead") }, []int64{id1}},
	}
	for _, tt := range tests {
		testenv.Check(t, tt.name, tt.act())
		if ids := list(); len(ids) != len(tt.wantID) || ids[0] != tt.wantID[0] {
			t.Errorf("%s: List = %v; want %v", tt.name, ids, tt.wantID)
		}
	}
	got, err = ts.Get(ctx, id1)
	testenv.Check(t, "Get", err)
	if got.Title != changed.Title || got.UpdatedBy != "hr-lead" || got.CreatedBy != "hr-admin" || !got.UpdatedAt.Equal(t0.Add(2*time.Second)) {
		t.Errorf("after Update: %q by %q (created by %q) at %v", got.Title, got.UpdatedBy, got.CreatedBy, got.UpdatedAt)
	}
	if v := testenv.Column[int](t, db, "SELECT version FROM notice_templates WHERE id = ?", id1); v[0] != 2 {
		t.Errorf("version after one change = %d; want 2", v[0])
	}
	// A deleted template is kept, as it was, for the audit.
	if v := testenv.Column[string](t, db, "SELECT CONCAT(name, '/', version, '/', updated_by) FROM notice_templates WHERE id = ?", id2); v[0] != "年假/1/hr-lead" {
		t.Errorf("deleted template row = %s; want 年假/1/hr-lead (unchanged by the later update)", v[0])
	}
	if _, err := ts.Get(ctx, id2); !errors.Is(err, yidu.ErrNotFound) {
		t.Errorf("Get of a deleted template = %v; want ErrNotFound", err)
	}
	// Configured without the other app, its templates are not found.
	if _, err := store.NewTemplates(db, []yidu.App{testApp}, c.now).Get(ctx, id1+2); !errors.Is(err, yidu.ErrNotFound) {
		t.Errorf("Get of an unconfigured app's template = %v; want ErrNotFound", err)
	}
}
