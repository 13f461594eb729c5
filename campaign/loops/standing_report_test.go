package loops

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/progress"
)

// seer is progress as the standing report asks it: the caller sees the
// notices of sees (whole), each of 10 recipients, 4 current, in one
// department; fail fails the counts.
type seer struct {
	sees  []string
	fail  error
	asked *[]string
}

func (s seer) Find(_ context.Context, _ *access.Principal, id string) (yidu.Message, access.View, error) {
	*s.asked = append(*s.asked, id)
	if !slices.Contains(s.sees, id) {
		return yidu.Message{}, access.View{}, yidu.ErrNotFound
	}
	return yidu.Message{CorpID: "c1", MsgID: id, App: "hr", Title: "手册 " + id}, access.Everyone, nil
}

func (s seer) Counts(context.Context, yidu.Message, access.View) (progress.Counts, error) {
	return progress.Counts{Recipients: 10, Read: 4}, s.fail
}

func (s seer) Departments(context.Context, yidu.Message, access.View, *access.Principal) ([]progress.Department, bool, error) {
	return []progress.Department{{ID: 2, Name: "研发", Recipients: 10, Read: 4, Unread: 6}}, false, nil
}

// TestStandingReportRow (issue 47): the standing report is the rules in
// force of the caller's corps it sees (an ended rule and another corp's
// are not asked for), each with its counts, pending joiners, cycle and
// departments, and the export row of its disclosure, which is due
// however few the rules; a report that fails is due no row.
func TestStandingReportRow(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	for i, m := range []struct{ corp, msgid string }{{"c1", "m1"}, {"c1", "m2"}, {"c1", "ended"}, {"c2", "m4"}} {
		_, err := db.Exec(`INSERT INTO messages (corp_id, msgid, app, agent_id, title, sent_at, recipient_count, audience_hash, state)
			VALUES (?, ?, 'hr', 1, '员工手册', ?, 10, '', 1)`, m.corp, m.msgid, now)
		testenv.Check(t, "message", err)
		// Created in this order: the report's is the oldest first.
		at := now.Add(time.Duration(i-10) * time.Minute)
		testenv.Check(t, "save", SaveStanding(ctx, db, m.corp, m.msgid, "hr", yidu.Audience{Departments: []int64{2}}, yidu.Standing{JoinDeadline: "7d"}, "hr", at))
	}
	admin := access.NewPrincipal("root", access.KindToken, false, []access.Grant{{Role: yidu.RoleAdmin, Scope: yidu.Scope{Corp: "c1"}}})
	testenv.Check(t, "end", EndStanding(ctx, db, admin, "c1", "ended", nil, now.Add(-time.Minute)))
	for c := 1; c <= 2; c++ {
		_, err := db.Exec("INSERT INTO standing_cycles (corp_id, msgid, cycle, version, started_at) VALUES ('c1', 'm1', ?, ?, ?)", c, c, now.AddDate(0, c-3, 0))
		testenv.Check(t, "cycle", err)
	}
	sent := now.Add(-time.Hour)
	l := &StandingLoop{DB: db, Now: func() time.Time { return now },
		Tracker:   fakeEnroller{es: []yidu.Enrolment{{UID: 1, UserID: "u1", Version: 1, JoinedAt: sent, Deadline: now.AddDate(0, 0, 7), SentAt: &sent, Status: "sent"}}},
		Directory: fakeStandingDir{},
		Reads:     fakeReads{rcpt: roaring.BitmapOf(1, 2), read: roaring.BitmapOf(2)},
	}
	down := errors.New("redis: connection refused")
	tests := []struct {
		name  string
		sees  []string
		fail  error
		rules []string
		row   string
	}{
		{"sees both", []string{"m1", "m2", "ended", "m4"}, nil,
			[]string{"m1 hr 手册 m1 10 4 6 pending 1 cycle 2 研发 10/4", "m2 hr 手册 m2 10 4 6 pending 1 cycle 0 研发 10/4"},
			"export ok root token   2 standing"},
		{"sees one", []string{"m2"}, nil, []string{"m2 hr 手册 m2 10 4 6 pending 1 cycle 0 研发 10/4"}, "export ok root token   1 standing"},
		{"sees none", nil, nil, []string{}, "export ok root token   0 standing"},
		{"progress down", []string{"m1"}, down, nil, "      0 "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var asked []string
			rules, row, err := l.Report(ctx, admin, seer{sees: tc.sees, fail: tc.fail, asked: &asked})
			if !errors.Is(err, tc.fail) {
				t.Fatalf("Report = %v; want %v", err, tc.fail)
			}
			var got []string
			if rules != nil {
				got = []string{}
			}
			for _, r := range rules {
				d := r.Departments[0]
				got = append(got, fmt.Sprintf("%s %s %s %d %d %d pending %d cycle %d %s %d/%d", r.MsgID, r.App, r.Title, r.Recipients, r.Current, r.NotCurrent,
					r.Pending, r.Cycle, d.Name, d.Recipients, d.Read))
			}
			if !slices.Equal(got, tc.rules) || (got == nil) != (tc.rules == nil) {
				t.Errorf("Report rules %q; want %q", got, tc.rules)
			}
			gotRow := fmt.Sprintf("%s %s %s %s %s %s %d %s", row.Action, row.Outcome, row.Actor, row.ActorKind, row.CorpID, row.Role, row.People, row.Detail)
			if gotRow != tc.row {
				t.Errorf("Report row %q; want %q", gotRow, tc.row)
			}
			if slices.Contains(asked, "ended") || slices.Contains(asked, "m4") {
				t.Errorf("Report asked for %q; want the rules in force of c1 only", asked)
			}
		})
	}
}
