package ledger_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/yidu-io/yidu/flushd"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/internal/tsatest"
	"github.com/yidu-io/yidu/ledger"
)

// tsaProxy stands between the ledger and a real test TSA: it forwards
// requests, or answers 500 while down, or answers every request after
// the first with the first's reply (a replay) while replay is set.
type tsaProxy struct {
	URL string

	mu       sync.Mutex
	down     bool
	replay   bool
	recorded []byte
	// asked counts the requests that reached the proxy.
	asked int
}

func startTSAProxy(t *testing.T, tsa *tsatest.TSA) *tsaProxy {
	t.Helper()
	p := &tsaProxy{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.asked++
		if p.down {
			http.Error(w, "TSA down", http.StatusInternalServerError)
			return
		}
		if p.replay && p.recorded != nil {
			_, _ = w.Write(p.recorded)
			return
		}
		body, _ := io.ReadAll(r.Body)
		resp, err := http.Post(tsa.URL, r.Header.Get("Content-Type"), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusOK {
			p.recorded = b
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

func (p *tsaProxy) set(down, replay bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down, p.replay = down, replay
}

func (p *tsaProxy) requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.asked
}

// duringStamp is a Stamper that runs during before it asks the TSA (a
// second replica's turn while the first waits for the TSA).
type duringStamp struct {
	ledger.Stamper
	during func()
}

func (d *duringStamp) Stamp(ctx context.Context, sum []byte) ([]byte, error) {
	if d.during != nil {
		d.during()
	}
	return d.Stamper.Stamp(ctx, sum)
}

func storedToken(t *testing.T, db *sql.DB, size uint64) []byte {
	t.Helper()
	var tok []byte
	err := db.QueryRow("SELECT tsa_token FROM ledger_checkpoints WHERE corp_id = ? AND size = ?", corp, size).Scan(&tok)
	testenv.Check(t, "token", err)
	return tok
}

// stampedLedger is a ledger over f's database (a replica's) signing
// with the test's key and asking the TSA at url.
func stampedLedger(t *testing.T, f *fixture, url string) *ledger.Ledger {
	t.Helper()
	stamper, err := ledger.NewTSA(url, nil)
	testenv.Check(t, "tsa", err)
	l, err := ledger.New(f.db, ledger.Options{Now: f.clk.now, Signer: mustSigner(t), Stamper: stamper})
	testenv.Check(t, "ledger", err)
	return l
}

var (
	signerOnce sync.Once
	signerKey  string
)

// mustSigner is one signing key for every ledger of the test binary (two
// replicas sign alike).
func mustSigner(t *testing.T) note.Signer {
	t.Helper()
	signerOnce.Do(func() { signerKey = mustKey(t) })
	s, _, err := ledger.ParseSigningKey(signerKey)
	testenv.Check(t, "key", err)
	return s
}

// TestDayCheckpointStampRetried: the TSA fails (HTTP 500) when the day
// closes, so its checkpoint has no token; StampDue asks again only
// after the backoff, and, the TSA back, stores a token openssl ts
// -verify accepts for the checkpoint. A second replica's StampDue while
// the first waits for the TSA does not ask it (MySQL's claim decides).
func TestDayCheckpointStampRetried(t *testing.T) {
	tsa := tsatest.Start(t)
	proxy := startTSAProxy(t, tsa)
	f, _ := signedFixture(t, 10)
	ctx := context.Background()
	f.l = stampedLedger(t, f, proxy.URL)
	var err error
	f.w, err = flushd.NewWriter(f.db, flushd.WriterOptions{Ledger: f.l})
	testenv.Check(t, "writer", err)
	f.read(t, []uint32{1, 2, 3}, f.clk.t.Add(-time.Minute))
	f.clk.t = f.clk.t.Add(24 * time.Hour)

	proxy.set(true, false)
	cps, err := f.l.SealDue(ctx)
	testenv.Check(t, "SealDue", err)
	if len(cps) != 1 || cps[0].Timestamp != nil || proxy.requests() != 1 {
		t.Fatalf("SealDue with the TSA down = %+v (TSA asked %d times); want the day's checkpoint without a token", cps, proxy.requests())
	}
	c := cps[0]
	if tok := storedToken(t, f.db, c.Size); tok != nil {
		t.Fatalf("stored token with the TSA down: %d bytes", len(tok))
	}
	// Within the backoff nothing asks, and SealDue does not see the day.
	if got, err := f.l.StampDue(ctx); err != nil || len(got) != 0 || proxy.requests() != 1 {
		t.Fatalf("StampDue within the backoff = %d, %v (TSA asked %d times); want nothing asked", len(got), err, proxy.requests())
	}
	// The TSA still down after the backoff: the failure is an error
	// (the checkpoint loop counts and logs it), and the next wait doubles.
	f.clk.t = f.clk.t.Add(time.Minute)
	if got, err := f.l.StampDue(ctx); err == nil || !strings.Contains(err.Error(), "HTTP 500") || len(got) != 0 || proxy.requests() != 2 {
		t.Fatalf("StampDue with the TSA down = %d, %v (TSA asked %d times); want an HTTP 500 error", len(got), err, proxy.requests())
	}
	f.clk.t = f.clk.t.Add(time.Minute)
	if got, err := f.l.StampDue(ctx); err != nil || len(got) != 0 || proxy.requests() != 2 {
		t.Fatalf("StampDue a minute after the second failure = %d, %v (TSA asked %d times); want nothing asked (2 min backoff)", len(got), err, proxy.requests())
	}

	// The TSA back: a second replica runs its turn while the first waits
	// for the TSA, and does not ask.
	proxy.set(false, false)
	f.clk.t = f.clk.t.Add(time.Minute)
	replica := stampedLedger(t, f, proxy.URL)
	first, err := ledger.NewTSA(proxy.URL, nil)
	testenv.Check(t, "tsa", err)
	var replicaGot []ledger.Checkpoint
	var replicaErr, raceErr error
	var raceAsked int
	l, err := ledger.New(f.db, ledger.Options{Now: f.clk.now, Signer: mustSigner(t), Stamper: &duringStamp{Stamper: first, during: func() {
		replicaGot, replicaErr = replica.StampDue(ctx)
		// The replica picked the checkpoint in the same turn, before
		// this one's claim: MySQL's conditional UPDATE refuses it.
		before := proxy.requests()
		_, raceErr = ledger.StampOne(replica, ctx, c)
		raceAsked = proxy.requests() - before
	}}})
	testenv.Check(t, "ledger", err)
	got, err := l.StampDue(ctx)
	testenv.Check(t, "StampDue", err)
	if len(got) != 1 || got[0].Size != c.Size || got[0].Timestamp == nil || proxy.requests() != 3 {
		t.Fatalf("StampDue with the TSA back = %+v (TSA asked %d times); want the day's checkpoint stamped once", got, proxy.requests())
	}
	if replicaErr != nil || len(replicaGot) != 0 {
		t.Errorf("the other replica's StampDue during the try = %d, %v; want nothing (claimed)", len(replicaGot), replicaErr)
	}
	if !errors.Is(raceErr, ledger.ErrStampClaimed) || raceAsked != 0 {
		t.Errorf("the other replica's try in the same turn = %v (TSA asked %d times); want ErrStampClaimed, not asked", raceErr, raceAsked)
	}
	tok := storedToken(t, f.db, c.Size)
	if !bytes.Equal(tok, got[0].Timestamp) {
		t.Fatal("the stored token is not the one StampDue returned")
	}
	if err := tsa.Verify([]byte(c.Note), tok); err != nil {
		t.Errorf("openssl ts -verify of the retried token: %v", err)
	}
	f.clk.t = f.clk.t.Add(time.Hour)
	if got, err := f.l.StampDue(ctx); err != nil || len(got) != 0 || proxy.requests() != 3 {
		t.Errorf("StampDue once stamped = %d, %v (TSA asked %d times); want nothing asked", len(got), err, proxy.requests())
	}
	if rep := f.verify(t, ""); len(rep.Problems) != 0 {
		t.Errorf("verify: %v", rep.Problems)
	}
}

// TestStampRefusesReplayedToken: a TSA (or whoever stands between)
// answering with the genuine token of an earlier request over the same
// digest is refused (its nonce is not the request's), and nothing is
// stored for the checkpoint.
func TestStampRefusesReplayedToken(t *testing.T) {
	tsa := tsatest.Start(t)
	proxy := startTSAProxy(t, tsa)
	f, _ := signedFixture(t, 10)
	ctx := context.Background()
	f.read(t, []uint32{1, 2, 3}, f.clk.t.Add(-time.Minute))
	f.clk.t = f.clk.t.Add(24 * time.Hour)
	c, err := f.l.Seal(ctx, corp, "2026-12-03")
	testenv.Check(t, "Seal", err)
	stamper, err := ledger.NewTSA(proxy.URL, nil)
	testenv.Check(t, "tsa", err)
	sum := sha256.Sum256([]byte(c.Note))
	earlier, err := stamper.Stamp(ctx, sum[:])
	testenv.Check(t, "first stamp", err)
	if err := tsa.Verify([]byte(c.Note), earlier); err != nil {
		t.Fatalf("openssl ts -verify of the earlier token: %v", err)
	}
	proxy.set(false, true)
	if tok, err := stamper.Stamp(ctx, sum[:]); err == nil || !strings.Contains(err.Error(), "nonce") {
		t.Fatalf("Stamp answered by a replay = %d bytes, %v; want refused for its nonce", len(tok), err)
	}
	l, err := ledger.New(f.db, ledger.Options{Now: f.clk.now, Signer: mustSigner(t), Stamper: stamper})
	testenv.Check(t, "ledger", err)
	if got, err := l.StampDue(ctx); err == nil || !strings.Contains(err.Error(), "nonce") || len(got) != 0 {
		t.Fatalf("StampDue answered by a replay = %d, %v; want refused for its nonce", len(got), err)
	}
	if tok := storedToken(t, f.db, c.Size); tok != nil {
		t.Errorf("a replayed token was stored (%d bytes)", len(tok))
	}
	if proxy.requests() != 3 {
		t.Errorf("TSA asked %d times; want 3", proxy.requests())
	}
}
