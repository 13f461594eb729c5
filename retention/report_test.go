package retention

import "testing"

// TestReportsAdd: a report sums its notices' person rows the same way in
// both runs, and each its own counts.
func TestReportsAdd(t *testing.T) {
	one := PersonRows{Records: 3, Orphans: 1, Reminders: 2}
	two := PersonRows{Records: 5, Orphans: 0, Reminders: 7}
	want := PersonRows{Records: 8, Orphans: 1, Reminders: 9}

	var ar AnonymiseReport
	for _, am := range []AnonymisedMessage{
		{PersonRows: one, Sends: 1, Audit: 4},
		{PersonRows: two, Sends: 0, Audit: 1},
	} {
		ar.add(am)
	}
	if got := (AnonymiseReport{Messages: 2, PersonRows: want, Sends: 1, Audit: 5}); ar != got {
		t.Errorf("AnonymiseReport = %+v; want %+v", ar, got)
	}

	var pr PurgeReport
	for _, pm := range []PurgedMessage{
		{PersonRows: one, Sends: 2, FollowUps: 3, Summarized: true},
		{PersonRows: two, Sends: 1, FollowUps: 0},
	} {
		pr.add(pm)
	}
	if got := (PurgeReport{Messages: 2, PersonRows: want, Sends: 3, FollowUps: 3, Summaries: 1}); pr != got {
		t.Errorf("PurgeReport = %+v; want %+v", pr, got)
	}

	// personTables counts into the PersonRows it is given.
	var p PersonRows
	for _, tt := range personTables(&p) {
		*tt.n++
	}
	if p != (PersonRows{Records: 4, Orphans: 1, Reminders: 2}) {
		t.Errorf("personTables counted %+v; want 4 records, 1 orphan, 2 reminders", p)
	}
}
