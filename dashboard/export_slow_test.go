package dashboard

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// throttled reads r at about rate bytes per second.
type throttled struct {
	r    io.Reader
	rate int
}

func (t throttled) Read(p []byte) (int, error) {
	const tick = 20 * time.Millisecond
	p = p[:min(len(p), t.rate/int(time.Second/tick))]
	n, err := t.r.Read(p)
	time.Sleep(tick)
	return n, err
}

// TestExportToSlowReader: an export lasts as long as the client keeps
// reading. A reader taking several times the per-request write timeout
// still gets every one of 300,000 rows: each chunk gets ExportStall, the
// whole download no limit (issue: CSV export cut at 15 s).
func TestExportToSlowReader(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 300,000 rows slowly")
	}
	const n = 300_000
	h, _ := benchServer(t, n, 10, nil, func(o *deps) {
		o.WriteTimeout = 300 * time.Millisecond
		o.ExportStall = 5 * time.Second
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/messages/big/export.csv", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+acmeToken)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("export = %d", resp.StatusCode)
	}
	// 2 MB/s: about 7 s for the 13 MB, over 20 times the write timeout.
	// (Much slower readers are fine too, but TCP on loopback opens its
	// window in large steps, so one write may wait buffer/2 ÷ rate: the
	// stall must cover that, as DefaultExportStall does for 200 KB/s.)
	lines := 0
	buf := make([]byte, 64<<10)
	src := throttled{resp.Body, 2 << 20}
	for {
		n, err := src.Read(buf)
		lines += bytes.Count(buf[:n], []byte{'\n'})
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d lines: %v", lines, err)
		}
	}
	took := time.Since(start)
	if lines != n+1 {
		t.Errorf("export had %d lines in %v; want the header and %d rows", lines, took, n)
	}
	if took < time.Second {
		t.Logf("the read took %v only: not slower than the write timeout, the test proves little", took)
	}
}
