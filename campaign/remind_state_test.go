package campaign

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/progress"
)

// noArchive is progress's Archive of a notice whose keys Redis keeps:
// nothing to restore.
type noArchive struct{}

func (noArchive) LoadReads(context.Context, string, string) (yidu.Message, *roaring.Bitmap, *roaring.Bitmap, map[yidu.Signal]*roaring.Bitmap, bool, error) {
	return yidu.Message{}, nil, nil, nil, false, nil
}

func (noArchive) ReadTimes(context.Context, string, string, []uint32) (map[uint32]time.Time, error) {
	return nil, nil
}

// pageReaders is Readers over the real progress (Redis bitmaps) for who
// is in which state, and the fixture's u<uid> UserIDs.
type pageReaders struct {
	*progress.Progress
	ids readers
}

func (r pageReaders) UserIDs(ctx context.Context, corp string, uids *roaring.Bitmap) (map[uint32]string, int, error) {
	return r.ids.UserIDs(ctx, corp, uids)
}

var _ StateReaders = pageReaders{}

// TestRemindByState: a reminder chooses whom by the reading page's
// states (issue 49, finding 6) on the real bitmaps in Redis and the
// ledger in MySQL: state opened reaches exactly the people who opened
// the notice without reading it to the end, a leader only theirs, an
// unknown or final state is a 400 on state that sends nothing, and the
// default still reminds everyone unread who is due.
func TestRemindByState(t *testing.T) {
	f := newServiceFixture(t)
	ctx := context.Background()
	rdb, prefix := testenv.Redis(t)
	bm, err := bitmap.New(rdb, bitmap.Options{Prefix: prefix, Registerer: prometheus.NewRegistry()})
	testenv.Check(t, "bitmap store", err)
	t.Cleanup(bm.Close)
	f.m.ReadRule = yidu.ReadRuleAcknowledged
	f.m.AgentID, f.m.Title, f.m.Recipients = 1, "新考勤制度", 7
	// u1, u7 never opened it; u2, u3 opened it (u3 pressed the card's
	// button too, which counts for nothing under acknowledged); u4, u5
	// read it to the end; u6 acknowledged it.
	rec := roaring.BitmapOf(1, 2, 3, 4, 5, 6, 7)
	testenv.Check(t, "put message", bm.PutMessage(ctx, f.m, rec))
	testenv.Check(t, "restore reads", bm.RestoreReads(ctx, f.m, rec, roaring.BitmapOf(6), map[yidu.Signal]*roaring.Bitmap{
		yidu.SignalButton:       roaring.BitmapOf(3),
		yidu.SignalLink:         roaring.BitmapOf(2, 3, 4, 5, 6),
		yidu.SignalReadToEnd:    roaring.BitmapOf(4, 5, 6),
		yidu.SignalAcknowledged: roaring.BitmapOf(6),
	}))
	prog, err := progress.New(noArchive{}, bm, progress.Options{Now: f.c.now})
	testenv.Check(t, "progress.New", err)
	l, err := store.NewReminderLog(f.db, "replica-a", 0, f.c.now, slog.New(slog.DiscardHandler))
	testenv.Check(t, "store.NewReminderLog", err)
	s := newService(t, f.store, Options{Messenger: f.msg, Scope: f.acc, Reminders: l,
		Readers: pageReaders{Progress: prog, ids: readers{f: f}}, RemindInterval: time.Hour, Now: f.c.now})
	sender := principal(t, "hr-sender", yidu.RoleSender, []string{testApp.Name}, nil)
	lead3 := f.leader(t, "lead3")

	for _, row := range []struct {
		name   string
		caller *access.Principal
		state  yidu.ReadState
		// want are the people reminded; badState: a 400 on state instead,
		// tooSoon: everyone chosen was reminded within the interval.
		want              []string
		badState, tooSoon bool
	}{
		{name: "acknowledged is not a state to remind", caller: sender, state: yidu.ReadStateAcknowledged, badState: true},
		{name: "an unknown state", caller: sender, state: "unread", badState: true},
		{name: "a leader's read_to_end: only their own", caller: lead3, state: yidu.ReadStateReadToEnd, want: ids(4, 5)},
		{name: "opened: exactly who opened and did not finish", caller: sender, state: yidu.ReadStateOpened, want: ids(2, 3)},
		{name: "opened again within the interval", caller: sender, state: yidu.ReadStateOpened, tooSoon: true},
		{name: "unopened", caller: sender, state: yidu.ReadStateUnopened, want: ids(1, 7)},
		{name: "read_to_end: reminded by the leader already", caller: sender, state: yidu.ReadStateReadToEnd, tooSoon: true},
	} {
		before := len(f.msg.reminders())
		rep, err := s.Remind(ctx, Remind{Caller: row.caller, Message: f.m, State: row.state})
		got := f.msg.reminders()
		var fe *yidu.FieldError
		var ts *TooSoonError
		switch {
		case row.badState:
			if !errors.As(err, &fe) || fe.Field != "state" {
				t.Errorf("%s: err = %v; want a FieldError on state", row.name, err)
			}
		case row.tooSoon:
			if !errors.As(err, &ts) {
				t.Errorf("%s: err = %v; want too soon", row.name, err)
			}
		case err != nil:
			t.Errorf("%s: %v", row.name, err)
		case len(got) != before+1 || !slices.Equal(got[before], row.want):
			t.Errorf("%s: reminded %v; want %v", row.name, got[before:], row.want)
		case rep.Reminded != len(row.want) || rep.Unread != len(row.want):
			t.Errorf("%s: report %+v; want %d reminded of %d", row.name, rep, len(row.want), len(row.want))
		}
		if (row.badState || row.tooSoon) && len(got) != before {
			t.Errorf("%s: cards went to %v", row.name, got[before:])
		}
	}
	// The default, state "": everyone unread not yet reminded, which is
	// nobody now (u6 acknowledged, the rest were reminded by state).
	if _, err := s.Remind(ctx, Remind{Caller: sender, Message: f.m}); !errors.As(err, new(*TooSoonError)) {
		t.Errorf("default reminder: err = %v; want too soon (everyone unread was reminded by state)", err)
	}
	rows := testenv.Column[string](t, f.db, `SELECT CONCAT(uid, ':', scope) FROM manual_reminders
		WHERE corp_id = ? AND msgid = ? ORDER BY uid`, f.m.CorpID, f.m.MsgID)
	if want := []string{"1:all", "2:all", "3:all", "4:led", "5:led", "7:all"}; !slices.Equal(rows, want) {
		t.Errorf("manual_reminders = %v; want %v", rows, want)
	}
}
