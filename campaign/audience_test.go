package campaign

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
)

// limitDir is the directory access reads for a sender kept to an
// audience: 1 总部 ├ 3 销售 (lisi, uid 2) └ 4 研发 (zhangsan, uid 1), as
// the Store's directory expands them.
type limitDir struct{}

var limitMembers = map[int64][]uint32{1: {1, 2}, 3: {2}, 4: {1}}

func (limitDir) DepartmentMembers(_ context.Context, _ string, ds []int64, _ bool) (*roaring.Bitmap, error) {
	b := roaring.New()
	for _, d := range ds {
		b.AddMany(limitMembers[d])
	}
	return b, nil
}

func (limitDir) Lookup(_ context.Context, _, userID string) (uint32, bool, error) {
	uid, ok := map[string]uint32{"zhangsan": 1, "lisi": 2}[userID]
	return uid, ok, nil
}

func (limitDir) Users(_ context.Context, _ string, uids []uint32) (map[uint32]yidu.User, error) {
	out := map[uint32]yidu.User{}
	for _, u := range uids {
		out[u] = yidu.User{UID: u, Status: yidu.StatusActive}
	}
	return out, nil
}

func (limitDir) Departments(context.Context, string) ([]yidu.Department, error) {
	return []yidu.Department{{ID: 1}, {ID: 3, ParentID: 1}, {ID: 4, ParentID: 1}}, nil
}

// actTables are every table an act on a notice may write.
var actTables = []string{"campaigns", "follow_ups", "follow_up_rounds", "notice_acts", "manual_reminders", "reminder_log", "notice_versions"}

// checksums is CHECKSUM TABLE of each of actTables: equal checksums, no
// row written, changed or deleted.
func checksums(t *testing.T, f *serviceFixture) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, tb := range actTables {
		var name string
		var sum int64
		if err := f.db.QueryRow("CHECKSUM TABLE "+tb).Scan(&name, &sum); err != nil {
			t.Fatalf("CHECKSUM TABLE %s: %v", tb, err)
		}
		var n int64
		testenv.Check(t, "count", f.db.QueryRow("SELECT COUNT(*) FROM "+tb).Scan(&n))
		out[tb] = sum ^ n<<48
	}
	return out
}

// TestSenderKeptToAudience is issue 41 item 3's test: a sender kept to
// department 4 gets 403 naming the field for department 3, a tag outside
// it and 全员, whether composing, editing, sending now or reminding, and
// the database is unchanged; department 4 itself is composed.
func TestSenderKeptToAudience(t *testing.T) {
	f := newServiceFixture(t)
	ctx := context.Background()
	acc, err := access.New(access.Config{}, limitDir{}, f.c.now)
	testenv.Check(t, "access.New", err)
	l, err := store.NewReminderLog(f.db, "replica-a", 0, f.c.now, slog.New(slog.DiscardHandler))
	testenv.Check(t, "store.NewReminderLog", err)
	rounds := &loops.Rounds{DB: f.db, Now: f.c.now, MinGap: time.Minute, Log: slog.New(slog.DiscardHandler)}
	s := newService(t, f.store, Options{Rounds: rounds, Messenger: f.msg, Audiences: acc, Reminders: l, Readers: readers{f: f}, Now: f.c.now})
	lisi := access.NewPrincipal("lisi", access.KindWeCom, false, []access.Grant{{Role: yidu.RoleSender,
		Scope: yidu.Scope{Corp: testApp.CorpID, Apps: []string{testApp.Name}, Audience: yidu.SenderAudience{Departments: []int64{4}}}}})
	admin := access.NewPrincipal("admin", access.KindToken, true, nil)

	// An admin's notice to 全员, which lisi may not touch.
	everyone := draft(f.c, time.Hour)
	everyone.Audience = yidu.Audience{All: true}
	theirs, err := s.Compose(ctx, admin, Compose{Draft: everyone})
	testenv.Check(t, "Compose(admin, 全员)", err)
	f.m.MsgID = theirs.MsgID

	before := checksums(t, f)
	compose := func(au yidu.Audience) error {
		d := draft(f.c, time.Hour)
		d.Audience = au
		_, err := s.Compose(ctx, lisi, Compose{Draft: d})
		return err
	}
	title := "改过的标题"
	for _, tc := range []struct {
		name  string
		act   func() error
		field string
	}{
		{"compose to department 3", func() error { return compose(yidu.Audience{Departments: []int64{3}}) }, "audience.departments"},
		{"compose to 4 and 3", func() error { return compose(yidu.Audience{Departments: []int64{4, 3}}) }, "audience.departments"},
		{"compose to a tag outside", func() error { return compose(yidu.Audience{Tags: []int64{7}}) }, "audience.tags"},
		{"compose to 全员", func() error { return compose(yidu.Audience{All: true}) }, "audience.all"},
		{"compose to a member outside", func() error { return compose(yidu.Audience{UserIDs: []string{"lisi"}}) }, "audience.userids"},
		{"edit a notice to 全员", func() error {
			_, _, err := s.Edit(ctx, lisi, theirs, yidu.Patch{Title: &title}, nil)
			return err
		}, "audience.all"},
		{"move it to department 3", func() error {
			_, _, err := s.Edit(ctx, lisi, theirs, yidu.Patch{Audience: &yidu.Audience{Departments: []int64{3}}}, nil)
			return err
		}, "audience.all"}, // the notice as it is is outside already (issue 46)
		{"send it now", func() error { _, _, err := s.SendNow(ctx, lisi, theirs); return err }, "audience.all"},
		{"preview department 3", func() error {
			return s.CheckAudience(ctx, lisi, testApp, yidu.Audience{Departments: []int64{3}})
		}, "audience.departments"},
		{"remind a notice read outside", func() error { _, err := f.remind(s, lisi); return err }, "audience"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.act()
			var ae *AudienceError
			if !errors.As(err, &ae) || ae.Field != tc.field || !errors.Is(err, ErrForbidden) {
				t.Fatalf("err = %v, want a 403 (ErrForbidden) AudienceError at %s", err, tc.field)
			}
		})
	}
	after := checksums(t, f)
	for _, tb := range actTables {
		if before[tb] != after[tb] {
			t.Errorf("table %s changed by refused acts", tb)
		}
	}
	if got := f.msg.reminders(); len(got) != 0 {
		t.Errorf("reminded %v; want nobody", got)
	}
	t.Run("inside is allowed", func(t *testing.T) {
		if err := compose(yidu.Audience{Departments: []int64{4}}); err != nil {
			t.Fatalf("Compose(department 4) = %v", err)
		}
		if err := compose(yidu.Audience{UserIDs: []string{"zhangsan"}}); err != nil {
			t.Fatalf("Compose(zhangsan) = %v", err)
		}
	})
	t.Run("no Audiences fails closed", func(t *testing.T) {
		bare := newService(t, f.store, Options{Now: f.c.now})
		if err := bare.CheckAudience(ctx, lisi, testApp, yidu.Audience{Departments: []int64{4}}); !errors.Is(err, ErrForbidden) {
			t.Fatalf("CheckAudience without Audiences = %v, want ErrForbidden", err)
		}
	})
}
