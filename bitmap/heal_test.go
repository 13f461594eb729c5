package bitmap

import (
	"context"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestSetWritten: flushd's written bits land within the recipients only,
// never clear a bit, and say when Redis lacks the message.
func TestSetWritten(t *testing.T) {
	s, _ := mustStore(t, Options{})
	ctx := context.Background()
	m := testMessage("m", 7, time.Now())
	testenv.Check(t, "PutMessage", s.PutMessage(ctx, m, uids(1, 2, 3, 4)))
	_, err := s.Mark(ctx, []Target{{CorpID: testCorp, MsgID: "m", Signal: yidu.SignalButton, Counted: true, UIDs: []uint32{1}}})
	testenv.Check(t, "Mark", err)

	tests := []struct {
		name       string
		read       *roaring.Bitmap
		signals    map[yidu.Signal]*roaring.Bitmap
		wantSet    int
		wantRead   []uint32
		wantButton []uint32
		wantEnter  []uint32
	}{
		{"nothing", nil, nil, 0, []uint32{1}, []uint32{1}, nil},
		{"already set", uids(1), map[yidu.Signal]*roaring.Bitmap{yidu.SignalButton: uids(1)}, 0, []uint32{1}, []uint32{1}, nil},
		// 9 is no recipient: never set, whatever flushd says.
		{"new and a non-recipient", uids(2, 9), map[yidu.Signal]*roaring.Bitmap{yidu.SignalButton: uids(2, 9)}, 2, []uint32{1, 2}, []uint32{1, 2}, nil},
		{"uncounted signal", nil, map[yidu.Signal]*roaring.Bitmap{yidu.SignalEnterAgent: uids(3, 4)}, 2, []uint32{1, 2}, []uint32{1, 2}, []uint32{3, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, found, err := s.SetWritten(ctx, testCorp, "m", tt.read, tt.signals)
			if err != nil || !found || set != tt.wantSet {
				t.Fatalf("SetWritten = %d, %v, %v; want %d, true, nil", set, found, err, tt.wantSet)
			}
			for _, c := range []struct {
				sig  yidu.Signal
				want []uint32
				read bool
			}{{0, tt.wantRead, true}, {yidu.SignalButton, tt.wantButton, false}, {yidu.SignalEnterAgent, tt.wantEnter, false}} {
				var b *roaring.Bitmap
				if c.read {
					b, _, err = s.ReadBitmap(ctx, testCorp, "m")
				} else {
					b, _, err = s.SignalBitmap(ctx, testCorp, "m", c.sig)
				}
				testenv.Check(t, "bitmap", err)
				if b == nil {
					b = roaring.New()
				}
				if !b.Equals(roaring.BitmapOf(c.want...)) {
					t.Errorf("read=%v signal %v = %v; want %v", c.read, c.sig, b.ToArray(), c.want)
				}
			}
		})
	}
	if _, n, bySig, _, _ := s.CountsBySignal(ctx, testCorp, "m"); n != 2 || bySig.EnterAgent != 2 {
		t.Errorf("counts: read %d, by signal %+v; want 2 read, enter_agent 2", n, bySig)
	}
	if _, found, err := s.SetWritten(ctx, testCorp, "gone", uids(1), nil); err != nil || found {
		t.Errorf("SetWritten of a message Redis lacks: found=%v err=%v; want false, nil", found, err)
	}
}

// TestHealerRestoresLostMessage: after Redis lost a message, a heal
// restores it from MySQL (which holds what was just written) and a later
// heal sets only what the restore lacked.
func TestHealerRestoresLostMessage(t *testing.T) {
	s, rdb := mustStore(t, Options{})
	ctx := context.Background()
	loader := newFakeLoader()
	m := testMessage("m", 7, time.Now())
	loader.add(m, uids(1, 2, 3), uids(1, 2), map[yidu.Signal]*roaring.Bitmap{yidu.SignalButton: uids(1, 2)})
	h, err := NewHealer(s, loader, nil)
	testenv.Check(t, "NewHealer", err)
	testenv.Check(t, "PutMessage", s.PutMessage(ctx, m, uids(1, 2, 3)))
	wipe(t, rdb, s)

	btn := map[yidu.Signal]*roaring.Bitmap{yidu.SignalButton: uids(2)}
	if set, err := h.Heal(ctx, testCorp, "m", uids(2), btn); err != nil || set != 0 {
		t.Fatalf("Heal of a lost message = %d, %v; want 0 (restored), nil", set, err)
	}
	if loader.loads != 1 {
		t.Errorf("loads = %d; want 1", loader.loads)
	}
	rc, rd, found, err := s.Counts(ctx, testCorp, "m")
	if err != nil || !found || rc != 3 || rd != 2 {
		t.Errorf("Counts after heal = %d, %d, %v, %v; want 3, 2 (MySQL's), true", rc, rd, found, err)
	}
	if set, err := h.Heal(ctx, testCorp, "m", uids(3), map[yidu.Signal]*roaring.Bitmap{yidu.SignalLink: uids(3)}); err != nil || set != 2 {
		t.Errorf("second Heal = %d, %v; want 2 bits, nil", set, err)
	}
	if loader.loads != 1 {
		t.Errorf("loads after the second heal = %d; want still 1", loader.loads)
	}
	if _, rd, _, _ := s.Counts(ctx, testCorp, "m"); rd != 3 {
		t.Errorf("read after second heal = %d; want 3", rd)
	}
	// A message MySQL does not know either: nothing, no error.
	if set, err := h.Heal(ctx, testCorp, "unknown", uids(1), nil); err != nil || set != 0 {
		t.Errorf("Heal of an unknown message = %d, %v", set, err)
	}
	if _, _, found, _ := s.Counts(ctx, testCorp, "unknown"); found {
		t.Error("unknown message appeared in Redis")
	}
}

// BenchmarkSetWritten: what flushd's live view costs per batch: 5000 uids
// written with a counted button press each (read + button bits), on a
// message of 100,000 recipients, every bit already set (the common case:
// the receiver marked them) — one script call per batch.
func BenchmarkSetWritten(b *testing.B) {
	s, _ := mustStore(b, Options{})
	ctx := context.Background()
	m := testMessage("m", 7, time.Now())
	testenv.Check(b, "PutMessage", s.PutMessage(ctx, m, rangeBitmap(0, 100_000)))
	batch := rangeBitmap(20_000, 25_000)
	sigs := map[yidu.Signal]*roaring.Bitmap{yidu.SignalButton: batch}
	b.ResetTimer()
	for b.Loop() {
		if _, _, err := s.SetWritten(ctx, testCorp, "m", batch, sigs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*5000/b.Elapsed().Seconds(), "uids/s")
}
