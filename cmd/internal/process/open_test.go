package process

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/yidu-io/yidu/internal/testenv"
)

// TestInterpolate: statements are interpolated unless the DSN says
// otherwise or names a charset or collation the driver cannot escape for.
func TestInterpolate(t *testing.T) {
	for _, c := range []struct {
		dsn  string
		want bool
	}{
		{"root@tcp(127.0.0.1:3306)/yidu", true},
		{"root@tcp(127.0.0.1:3306)/yidu?parseTime=true", true},
		{"root@tcp(127.0.0.1:3306)/yidu?charset=utf8mb4", true},
		{"root@tcp(127.0.0.1:3306)/yidu?charset=utf8mb4,utf8", true},
		{"root@tcp(127.0.0.1:3306)/yidu?interpolateParams=false", false},
		{"root@tcp(127.0.0.1:3306)/yidu?charset=gbk", false},
		{"root@tcp(127.0.0.1:3306)/yidu?charset=utf8mb4,gbk", false},
		{"root@tcp(127.0.0.1:3306)/yidu?collation=gbk_chinese_ci", false},
		{"root@tcp(127.0.0.1:3306)/yidu?collation=utf8mb4_unicode_ci", true},
	} {
		cfg, err := mysql.ParseDSN(c.dsn)
		if err != nil {
			t.Fatalf("%s: %v", c.dsn, err)
		}
		interpolate(c.dsn, cfg)
		if cfg.InterpolateParams != c.want {
			t.Errorf("interpolate(%s) = %v; want %v", c.dsn, cfg.InterpolateParams, c.want)
		}
	}
}

// TestOpenDBInterpolates: a pool OpenDB opens sends a statement with
// arguments as one query (no prepared statement on the server).
func TestOpenDBInterpolates(t *testing.T) {
	dsn := testenv.MySQLDSN(t)
	cfg, _ := mysql.ParseDSN(dsn)
	cfg.InterpolateParams = false
	db, err := OpenDB(cfg.FormatDSN())
	testenv.Check(t, "open", err)
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	prepared := func() int {
		var name string
		var n int
		testenv.Check(t, "status", db.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Com_stmt_prepare'").Scan(&name, &n))
		return n
	}
	before := prepared()
	var got string
	testenv.Check(t, "query", db.QueryRowContext(ctx, "SELECT CONCAT(?, ?)", "已", "读").Scan(&got))
	if got != "已读" {
		t.Fatalf("got %q", got)
	}
	if after := prepared(); after != before {
		t.Fatalf("%d statements prepared for one query with arguments; want 0", after-before)
	}
}

// TestWeComClientKeepsConnections: a burst of concurrent WeCom calls
// (a sign-in storm's code exchanges) reuses its connections for the next
// burst instead of dialling again.
func TestWeComClientKeepsConnections(t *testing.T) {
	var dials atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(5 * time.Millisecond) // the burst overlaps
		_, _ = w.Write([]byte(`{"errcode":0}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := wecomClient()
	burst := func() {
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				resp, err := c.Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			})
		}
		wg.Wait()
	}
	burst()
	first := dials.Load()
	burst()
	if again := dials.Load() - first; again > 0 {
		t.Fatalf("the second burst of 32 dialled %d new connections (the first %d); want 0", again, first)
	}
}
