package campaign

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestTemplates is issue 41 item 3 on MariaDB as an attacker's table: an
// admin saves a notice as a template; a sender of the app lists and
// reads it (to start a notice from it) but may not change or delete it;
// a sender of another app does not see it; the admin changes and deletes
// it.
func TestTemplates(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	hr2 := yidu.App{Name: "hr2", CorpID: "ww1", AgentID: 1000009}
	ts := newService(t, nil, Options{Templates: store.NewTemplates(db, []yidu.App{approvalApp, hr2}, func() time.Time { return time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC) })})
	admin := access.NewPrincipal("hr-admin", access.KindUser, false, []access.Grant{{Role: yidu.RoleAdmin, Scope: yidu.Scope{Corp: "ww1"}}})
	lisi := sender("lisi")
	other := access.NewPrincipal("it", access.KindUser, false, []access.Grant{{Role: yidu.RoleSender, Scope: yidu.Scope{Corp: "ww1", Apps: []string{"hr2"}}}})
	pol := yidu.Policy{Reminders: []string{"2h"}}
	tpl := yidu.Template{App: approvalApp, Name: "月度考勤提醒", Title: "请确认本月考勤", Body: "截止本月 25 日",
		Audience: yidu.Audience{Departments: []int64{2}}, FollowUp: &pol, Markdown: "# 考勤\n\n请确认。",
		Attachments: []string{"att-1"}, ReadRule: yidu.ReadRuleAcknowledged, MinReadSeconds: 10}

	if _, _, err := ts.CreateTemplate(ctx, lisi, tpl); !errors.Is(err, ErrForbidden) {
		t.Fatalf("a sender creates a template: %v, want ErrForbidden", err)
	}
	if _, _, err := ts.CreateTemplate(ctx, admin, yidu.Template{App: approvalApp}); !errors.Is(err, yidu.ErrInvalid) {
		t.Fatalf("a template without a name: %v, want ErrInvalid", err)
	}
	saved, _, err := ts.CreateTemplate(ctx, admin, tpl)
	testenv.Check(t, "Create", err)

	list, err := ts.ListTemplates(ctx, lisi, approvalApp)
	testenv.Check(t, "List(sender)", err)
	if len(list) != 1 || list[0].ID != saved.ID {
		t.Fatalf("the sender's list = %+v, want the template", list)
	}
	got, _, err := ts.Template(ctx, lisi, saved.ID)
	testenv.Check(t, "Get(sender)", err)
	if got.Title != tpl.Title || got.Markdown != tpl.Markdown || got.ReadRule != tpl.ReadRule || got.FollowUp == nil ||
		got.FollowUp.Reminders[0] != "2h" || len(got.Attachments) != 1 || got.Audience.Departments[0] != 2 || got.MinReadSeconds != 10 {
		t.Fatalf("the template read back = %+v, want what was saved", got)
	}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"a sender changes it", func() error { _, _, _, err := ts.UpdateTemplate(ctx, lisi, saved.ID, tpl); return err }(), ErrForbidden},
		{"a sender deletes it", func() error { _, err := ts.DeleteTemplate(ctx, lisi, saved.ID); return err }(), ErrForbidden},
		{"a sender of another app reads it", func() error { _, _, err := ts.Template(ctx, other, saved.ID); return err }(), yidu.ErrNotFound},
		{"a sender of another app lists them", func() error { _, err := ts.ListTemplates(ctx, other, approvalApp); return err }(), ErrForbidden},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	tpl.Name, tpl.Title = "月度考勤提醒（新）", "请确认上月考勤"
	upd, _, _, err := ts.UpdateTemplate(ctx, admin, saved.ID, tpl)
	testenv.Check(t, "Update", err)
	if upd.Title != "请确认上月考勤" || upd.UpdatedBy != "hr-admin" {
		t.Errorf("updated = %+v", upd)
	}
	_, err = ts.DeleteTemplate(ctx, admin, saved.ID)
	testenv.Check(t, "Delete", err)
	if list, _ := ts.ListTemplates(ctx, lisi, approvalApp); len(list) != 0 {
		t.Errorf("after delete the list has %d", len(list))
	}
}
