package audit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/internal/testenv"
)

func TestRecordAndPurge(t *testing.T) {
	db := testenv.MySQL(t)
	m := audit.NewMySQL(db)
	ctx := context.Background()
	old := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	for _, e := range []audit.Event{
		{At: old, Actor: "hr-admin", ActorKind: "password", Action: yidu.ActionSignIn, Outcome: "ok"},
		{At: now, Actor: "zhangsan", ActorKind: "wecom", Action: yidu.ActionExport, MsgID: "m1", People: 42, Outcome: "ok", Detail: "state=unread"},
	} {
		if err := m.Record(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []audit.Event{
		{At: now, Actor: "x", Action: "drop_table", Outcome: "ok"},
		{At: now, Actor: "", Action: yidu.ActionSend, Outcome: "ok"},
	} {
		if err := m.Record(ctx, bad); !errors.Is(err, yidu.ErrInvalid) {
			t.Errorf("Record(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	got := testenv.Column[string](t, db, "SELECT CONCAT(actor, ':', action, ':', people) FROM audit_events ORDER BY id")
	if len(got) != 2 || got[0] != "hr-admin:sign_in:0" || got[1] != "zhangsan:export:42" {
		t.Fatalf("rows %v", got)
	}
	n, err := m.Purge(ctx, now.Add(-90*24*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("Purge = %d, %v; want the old sign-in only", n, err)
	}
}

func TestActionValidate(t *testing.T) {
	for _, a := range yidu.Actions() {
		if err := a.Validate(); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
	for _, a := range []yidu.Action{"", "SIGN_IN", "sign_in ", "delete"} {
		if err := a.Validate(); !errors.Is(err, yidu.ErrInvalid) {
			t.Errorf("Validate(%q) = %v", a, err)
		}
	}
}
