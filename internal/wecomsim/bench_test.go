package wecomsim

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkPush measures the simulator alone against a receiver that answers
// 200 at once, with callbacks built before the timer starts.
func BenchmarkPush(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	for _, conc := range []int{1, 16} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			p, err := NewPusher(Options{Target: srv.URL, App: testApp, Concurrency: conc})
			if err != nil {
				b.Fatal(err)
			}
			users := make([]string, b.N)
			for i := range users {
				users[i] = UserID(i)
			}
			reqs, err := p.Build(CardReads(users, "m", "read", time.Unix(1700000000, 0), 0))
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			if s := p.Push(context.Background(), reqs); s.Failures != 0 {
				b.Fatalf("Push: %v", s)
			}
		})
	}
}
