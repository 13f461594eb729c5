package progress

import (
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func TestBuildDeptTreeCycle(t *testing.T) {
	depts := []yidu.Department{{ID: 5, ParentID: 6}, {ID: 6, ParentID: 5}, {ID: 7, ParentID: 7}}
	tr := buildDeptTree(depts, map[int64]*roaring.Bitmap{5: roaring.BitmapOf(1), 6: roaring.BitmapOf(2), 7: roaring.BitmapOf(3)})
	if len(tr.order) != 3 {
		t.Fatalf("nodes = %d; want 3", len(tr.order))
	}
	if n := tr.byID[7].Members.GetCardinality(); n != 1 {
		t.Errorf("self-parent 7 has %d members; want 1", n)
	}
}

func TestEstimate(t *testing.T) {
	mins := func(reads ...int64) []yidu.MinuteCount {
		var out []yidu.MinuteCount
		for i, r := range reads {
			out = append(out, yidu.MinuteCount{Minute: t0.Add(time.Duration(i) * time.Minute), Reads: r})
		}
		return out
	}
	tests := []struct {
		name             string
		now              time.Duration // since t0 (= sent_at)
		recipients, read int64
		curve            []yidu.MinuteCount
		rate             float64 // -1: null
		eta90, eta100    float64 // -1: null
	}{
		{"just sent", 30 * time.Second, 100, 10, nil, -1, -1, -1},
		{"nothing yet", 10 * time.Minute, 100, 0, nil, 0, -1, -1},
		{"all read", 10 * time.Minute, 100, 100, mins(100), 0, 0, 0},
		{"90 reached", 10 * time.Minute, 100, 95, mins(95), 0, 0, -1},
		{"steady 10/min", 10 * time.Minute, 1000, 100, mins(10, 10, 10, 10, 10, 10, 10, 10, 10, 10), 10, 80 * 60, 90 * 60},
		{"young message uses its age", 2 * time.Minute, 100, 20, mins(10), 10, 420, 480},
		{"no recipients", 10 * time.Minute, 0, 0, nil, -1, 0, 0},
	}
	for _, tc := range tests {
		rate, e90, e100 := estimate(t0.Add(tc.now), t0, tc.recipients, tc.read, tc.curve)
		gotRate := -1.0
		if rate != nil {
			gotRate = *rate
		}
		sec := func(e *ETA) float64 {
			if e == nil {
				return -1
			}
			return e.Seconds
		}
		if gotRate != tc.rate || sec(e90) != tc.eta90 || sec(e100) != tc.eta100 {
			t.Errorf("%s: estimate = %v, %v, %v; want %v, %v, %v", tc.name, gotRate, sec(e90), sec(e100), tc.rate, tc.eta90, tc.eta100)
		}
	}
}

func TestBucketCurve(t *testing.T) {
	var curve []yidu.MinuteCount
	var total int64
	var bySignal yidu.SignalCounts
	for i := range 3000 {
		// Each minute's reads split by signal: i%3 by button, 1 by link
		// when there are reads, the rest by app entry (or reconcile).
		n := int64(i % 7)
		button := min(int64(i%3), n)
		by := yidu.SignalCounts{Button: button, Link: min(n-button, 1)}
		curve = append(curve, yidu.MinuteCount{Minute: t0.Add(time.Duration(i) * time.Minute), Reads: n, BySignal: by})
		total += n
		bySignal.Button += by.Button
		bySignal.Link += by.Link
	}
	pts, width := bucketCurve(curve, t0)
	if len(pts) > maxCurvePoints || width != 5 {
		t.Errorf("%d points of width %d; want ≤ %d of 5", len(pts), width, maxCurvePoints)
	}
	if n := (Report{Curve: pts}).CurveTotal(); n != total {
		t.Errorf("bucketed total %d; want %d", n, total)
	}
	var got yidu.SignalCounts
	for _, p := range pts {
		got.Button += p.BySignal.Button
		got.Link += p.BySignal.Link
		got.EnterAgent += p.BySignal.EnterAgent
		if p.BySignal.Button+p.BySignal.Link+p.BySignal.EnterAgent > p.Reads {
			t.Errorf("bucket %v: by signal %+v more than its %d reads", p.At, p.BySignal, p.Reads)
		}
	}
	if got != bySignal {
		t.Errorf("bucketed by signal %+v; want %+v", got, bySignal)
	}
}

// TestReportMoved: a live view gets an event for new counts, a signal or
// a flushed minute, not for the ETAs' drift with the clock.
func TestReportMoved(t *testing.T) {
	eta := 3.0
	base := Report{Recipients: 10, Read: 4, BySignal: yidu.SignalCounts{Button: 3}, Curve: []CurvePoint{{Reads: 4}}}
	tests := []struct {
		name string
		edit func(*Report)
		want bool
	}{
		{"same", func(*Report) {}, false},
		{"clock only", func(r *Report) { r.AsOf = r.AsOf.Add(time.Minute); r.RatePerMinute = &eta }, false},
		{"read", func(r *Report) { r.Read++ }, true},
		{"recipients", func(r *Report) { r.Recipients++ }, true},
		{"a signal", func(r *Report) { r.BySignal.Link++ }, true},
		{"a flushed minute", func(r *Report) { r.Curve = append(r.Curve, CurvePoint{Reads: 1}) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := base
			r.Curve = append([]CurvePoint(nil), base.Curve...)
			tt.edit(&r)
			if got := r.Moved(base); got != tt.want {
				t.Errorf("Moved = %v; want %v", got, tt.want)
			}
		})
	}
}
