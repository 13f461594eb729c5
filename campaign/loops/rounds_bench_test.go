package loops

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
)

// BenchmarkRound100k: one follow-up round to 100,000 non-readers, end to
// end against MariaDB (the live bitmaps and WeCom faked): reading the
// bitmaps, recording 100 batches and 100,000 reminder_log rows before
// sending, 100 message/send calls, marking each. Reports the WeCom calls
// and the heap allocated per round (docs/benchmarks.md).
//
//	YIDU_TEST_REAL=1 go test -run '^$' -bench Round100k -benchtime 1x -benchmem ./campaign/
func BenchmarkRound100k(b *testing.B) {
	const n = 100_000
	uids := make([]uint32, n)
	for i := range uids {
		uids[i] = uint32(i + 1)
	}
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		f := newBenchFixture(b)
		msgID := fmt.Sprintf("bench-%d", i)
		f.noticeB(b, msgID, uids, yidu.Policy{Reminders: []string{"1h"}})
		f.clock.set(f.t0.Add(time.Hour))
		b.StartTimer()
		if err := f.rounds.Tick(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		calls := 0
		people := 0
		for task, c := range f.send.calls {
			calls += c
			people += len(f.send.batches[task])
		}
		if people != n {
			b.Fatalf("round reached %d; want %d", people, n)
		}
		b.ReportMetric(float64(calls), "wecom-calls/round")
		b.StartTimer()
	}
}
