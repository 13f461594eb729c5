package dashboard

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/internal/testenv"
)

// smallReader is an HTTP client whose connections have a small receive
// buffer: with smallBuffers' send buffer, a download larger than both
// cannot all be written before its client reads it.
func smallReader() *http.Client {
	d := &net.Dialer{}
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetReadBuffer(4096)
			}
			return c, err
		}}}
}

// TestExportCutShortAudited: an export.csv whose client reads part of it
// and goes away leaves, after its "started" row, a "failed" one saying how
// far it got; a whole download leaves "ok" with every row (issue 49:
// every download's audit row says what happened; export.csv's said ok
// for a file cut short).
func TestExportCutShortAudited(t *testing.T) {
	f := newFixture(t)
	f.srv.base.Audit = audit.NewMySQL(f.db)
	// 60,000 rows (about 1 MB): far more than the two small buffers hold.
	const n = 60_000
	uids := make([]uint32, n)
	for i := range uids {
		uids[i] = uint32(i + 1)
	}
	f.add(t, seeded{m: yidu.Message{CorpID: "acme", MsgID: "big", App: "hr", Title: "Big", SentAt: t0}, rec: uids})
	rows := func() []string {
		t.Helper()
		got := testenv.Column[string](t, f.db, `SELECT CONCAT_WS(' ', outcome, people, detail) FROM audit_events
			WHERE action = 'export' AND msgid = 'big' ORDER BY id`)
		f.exec(t, "DELETE FROM audit_events")
		return got
	}
	get := func(ts *httptest.Server, c *http.Client) *http.Response {
		t.Helper()
		req, err := http.NewRequest("GET", ts.URL+"/api/v1/messages/big/export.csv?state=all", nil)
		testenv.Check(t, "request", err)
		req.Header.Set("Authorization", "Bearer "+acmeToken)
		resp, err := c.Do(req)
		testenv.Check(t, "GET export.csv", err)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("export.csv = %d", resp.StatusCode)
		}
		return resp
	}

	t.Run("client gone midway", func(t *testing.T) {
		ts := httptest.NewUnstartedServer(f.h)
		ts.Listener = smallBuffers{ts.Listener}
		ts.Start()
		resp := get(ts, smallReader())
		if _, err := io.ReadFull(resp.Body, make([]byte, 32<<10)); err != nil {
			t.Fatalf("read the first 32 KB: %v", err)
		}
		_ = resp.Body.Close() // the client goes away with most of the file unread
		ts.Close()            // waits for the handler, its audit rows written
		got := rows()
		if len(got) != 2 || got[0] != "started 60000 state=all" || !strings.HasPrefix(got[1], "failed ") ||
			!strings.Contains(got[1], "state=all written=") {
			t.Errorf("audit rows of an export cut short = %q; want started 60000, then failed with how far it got", got)
		}
	})

	t.Run("whole download", func(t *testing.T) {
		ts := httptest.NewServer(f.h)
		resp := get(ts, ts.Client())
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		ts.Close()
		testenv.Check(t, "read export.csv", err)
		if lines := bytes.Count(body, []byte{'\n'}); lines != n+1 {
			t.Fatalf("export.csv has %d lines; want the header and %d rows", lines, n)
		}
		if got := rows(); len(got) != 2 || got[0] != "started 60000 state=all" || got[1] != "ok 60000 state=all" {
			t.Errorf("audit rows of a whole export = %q; want started 60000, then ok 60000", got)
		}
	})
}
