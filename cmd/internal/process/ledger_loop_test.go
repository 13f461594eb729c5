package process

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/yidu-io/yidu/internal/loop"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/internal/tsatest"
	"github.com/yidu-io/yidu/ledger"
)

// TestCheckpointLoopStampsLater (issue 48): the TSA answers 500 when
// the day closes, so the day's checkpoint has no token; with the TSA
// back and the backoff over, flushd's checkpoint loop stores one that
// openssl ts -verify accepts.
func TestCheckpointLoopStampsLater(t *testing.T) {
	tsa := tsatest.Start(t)
	var down atomic.Bool
	down.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "TSA down", http.StatusInternalServerError)
			return
		}
		body, _ := io.ReadAll(r.Body)
		resp, err := http.Post(tsa.URL, r.Header.Get("Content-Type"), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	db := testenv.MySQL(t)
	ctx := context.Background()
	const corp = "wwloopstamp"
	var now atomic.Int64
	now.Store(time.Date(2026, 12, 3, 10, 0, 0, 0, ledger.Zone).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()).In(ledger.Zone) }
	skey, _, err := note.GenerateKey(rand.Reader, "yidu.test")
	testenv.Check(t, "key", err)
	signer, _, err := ledger.ParseSigningKey(skey)
	testenv.Check(t, "signer", err)
	stamper, err := ledger.NewTSA(srv.URL, nil)
	testenv.Check(t, "tsa", err)
	l, err := ledger.New(db, ledger.Options{Now: clock, Signer: signer, Stamper: stamper})
	testenv.Check(t, "ledger", err)
	tx, err := db.BeginTx(ctx, nil)
	testenv.Check(t, "begin", err)
	_, err = l.Append(ctx, tx, corp, []ledger.Fact{ledger.Version{MsgID: "m1", Number: 1, SHA256: strings.Repeat("ab", 32), At: clock()}.Fact()})
	testenv.Check(t, "append", err)
	testenv.Check(t, "commit", tx.Commit())
	now.Add(int64(24 * time.Hour))
	day, err := l.Seal(ctx, corp, "2026-12-03")
	if err != nil || day.Timestamp != nil {
		t.Fatalf("Seal with the TSA down = token %v, %v; want the checkpoint without one", day.Timestamp != nil, err)
	}

	down.Store(false)
	now.Add(int64(time.Minute))
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); checkpointLoop(lctx, l, loop.Nop("checkpoint")) }()
	t.Cleanup(func() { cancel(); <-done })
	testenv.WaitFor(t, 20*time.Second, "the checkpoint loop stores the day's token", func() bool {
		c, err := l.CheckpointOf(ctx, corp, day.Size)
		return err == nil && c.Timestamp != nil
	})
	c, err := l.CheckpointOf(ctx, corp, day.Size)
	testenv.Check(t, "checkpoint", err)
	if err := tsa.Verify([]byte(c.Note), c.Timestamp); err != nil {
		t.Errorf("openssl ts -verify of the token the loop stored: %v", err)
	}
}
