package audit_test

import (
	"context"
	"errors"
	"fmt"
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

// TestList: filters, corps restriction and the keyset cursor walk every
// matching event once, newest first.
func TestList(t *testing.T) {
	db := testenv.MySQL(t)
	m := audit.NewMySQL(db)
	ctx := context.Background()
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	for i := range 7 {
		corp := "wwA"
		if i%3 == 0 {
			corp = "wwB"
		}
		e := audit.Event{At: t0.Add(time.Duration(i) * time.Minute), Actor: "u" + string(rune('0'+i%2)), ActorKind: "token",
			Action: yidu.ActionRemind, CorpID: corp, MsgID: "m1", Outcome: "ok"}
		if i == 6 {
			e.Action, e.MsgID = yidu.ActionSend, "m2"
		}
		if err := m.Record(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	walk := func(q audit.Query) []int64 {
		var ids []int64
		for range 10 {
			es, next, err := m.List(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range es {
				ids = append(ids, e.ID)
			}
			if next == 0 {
				return ids
			}
			q.Before = next
		}
		t.Fatal("cursor never ended")
		return nil
	}
	for _, c := range []struct {
		name string
		q    audit.Query
		want []int64
	}{
		{"all, pages of 2", audit.Query{Limit: 2}, []int64{7, 6, 5, 4, 3, 2, 1}},
		{"corp wwA", audit.Query{Corps: []string{"wwA"}, Limit: 3}, []int64{6, 5, 3, 2}},
		{"no corps", audit.Query{Corps: []string{}, Limit: 3}, nil},
		{"actor u1", audit.Query{Actor: "u1", Limit: 1}, []int64{6, 4, 2}},
		{"action send", audit.Query{Action: yidu.ActionSend, Limit: 5}, []int64{7}},
		{"msgid m1 since 10:04", audit.Query{MsgID: "m1", Since: t0.Add(4 * time.Minute), Limit: 5}, []int64{6, 5}},
	} {
		got := walk(c.q)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: ids %v, want %v", c.name, got, c.want)
		}
	}
	if _, _, err := m.List(ctx, audit.Query{Limit: audit.MaxLimit + 1}); !errors.Is(err, yidu.ErrInvalid) {
		t.Errorf("limit over max: %v", err)
	}
}

// TestEnded: a streamed download's end is ok only without an error, and
// a cut-short one says how far it got.
func TestEnded(t *testing.T) {
	start := audit.Event{Action: yidu.ActionExport, People: 60000, Outcome: audit.OutcomeStarted, Detail: "state=all"}
	tests := []struct {
		name    string
		written int64
		err     error
		want    audit.Event
	}{
		{"whole", 60000, nil, audit.Event{Action: yidu.ActionExport, People: 60000, Outcome: "ok", Detail: "state=all"}},
		{"cut short", 2000, errors.New("write: broken pipe"),
			audit.Event{Action: yidu.ActionExport, People: 2000, Outcome: "failed", Detail: "state=all written=2000"}},
	}
	for _, tt := range tests {
		if got := start.Ended(tt.written, tt.err); got != tt.want {
			t.Errorf("%s: Ended(%d, %v) = %+v; want %+v", tt.name, tt.written, tt.err, got, tt.want)
		}
	}
}
