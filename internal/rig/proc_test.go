package rig

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// startSh starts `sh -c script` and kills it when the test ends.
func startSh(tb testing.TB, script string) *Proc {
	tb.Helper()
	p, err := Start(Spec{Name: "sh", Path: "/bin/sh", Args: []string{"-c", script}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Kill)
	return p
}

func TestYiduListening(t *testing.T) {
	tests := []struct {
		line       string
		what, addr string
		ok         bool
	}{
		{`{"time":"x","level":"INFO","msg":"receiver listening","addr":"127.0.0.1:4100"}`, "receiver", "127.0.0.1:4100", true},
		{`{"msg":"flushd metrics listening","addr":"127.0.0.1:9"}`, "flushd metrics", "127.0.0.1:9", true},
		{`{"msg":"receiver listening"}`, "", "", false},
		{`{"msg":"flushd consuming","addr":"127.0.0.1:9"}`, "", "", false},
		{`receiver listening" not json`, "", "", false},
		{`127.0.0.1:4100`, "", "", false},
	}
	for _, tt := range tests {
		what, addr, ok := yiduListening(tt.line)
		if what != tt.what || addr != tt.addr || ok != tt.ok {
			t.Errorf("yiduListening(%q) = %q, %q, %v; want %q, %q, %v", tt.line, what, addr, ok, tt.what, tt.addr, tt.ok)
		}
	}
}

func TestKfakeAddr(t *testing.T) {
	tests := []struct {
		line string
		ok   bool
	}{
		{"127.0.0.1:4100", true},
		{"[::1]:4100", true},
		{"yidu-kfake: kfake: listen: address already in use", false},
		{"", false},
	}
	for _, tt := range tests {
		what, addr, ok := kfakeAddr(tt.line)
		if ok != tt.ok || (ok && (what != "kafka" || addr != tt.line)) {
			t.Errorf("kfakeAddr(%q) = %q, %q, %v; want ok %v", tt.line, what, addr, ok, tt.ok)
		}
	}
}

func TestProc(t *testing.T) {
	ctx := context.Background()
	t.Run("address, tail and SIGTERM", func(t *testing.T) {
		p := startSh(t, `trap 'echo bye; exit 3' TERM; echo starting; `+
			`echo '{"msg":"receiver listening","addr":"127.0.0.1:4100"}' >&2; while :; do sleep 0.05; done`)
		addr, err := p.Addr(ctx, "receiver", 5*time.Second)
		if err != nil || addr != "127.0.0.1:4100" {
			t.Fatalf("Addr(receiver) = %q, %v; want 127.0.0.1:4100", addr, err)
		}
		if !p.Running() {
			t.Fatal("not running after its announcement")
		}
		if err := p.Stop(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		if code := p.ExitCode(); code != 3 {
			t.Errorf("ExitCode() = %d; want 3 (the TERM trap's)", code)
		}
		if got, want := p.Tail(2), `{"msg":"receiver listening","addr":"127.0.0.1:4100"}`+"\nbye"; got != want {
			t.Errorf("Tail(2) = %q; want %q", got, want)
		}
	})
	t.Run("exit while waited for", func(t *testing.T) {
		p := startSh(t, `echo boom; exit 1`)
		_, err := p.Addr(ctx, "receiver", 5*time.Second)
		if err == nil || !strings.Contains(err.Error(), "sh exited") || !strings.Contains(err.Error(), "boom") {
			t.Errorf("Addr of an exited process = %v; want the exit and its output", err)
		}
		if p.AddrInUse() {
			t.Error("AddrInUse() after an exit for another reason")
		}
	})
	t.Run("no announcement", func(t *testing.T) {
		p := startSh(t, `exec sleep 10`)
		if _, err := p.Addr(ctx, "receiver", 50*time.Millisecond); err == nil {
			t.Error("Addr of a silent process = nil error")
		}
	})
	t.Run("stop kills what ignores SIGTERM", func(t *testing.T) {
		p := startSh(t, `trap '' TERM; echo ready; while :; do sleep 0.05; done`)
		for p.Tail(1) != "ready" {
			time.Sleep(10 * time.Millisecond)
		}
		start := time.Now()
		if err := p.Stop(200 * time.Millisecond); err == nil {
			t.Error("Stop of a process ignoring SIGTERM = nil error")
		}
		if took := time.Since(start); took > 5*time.Second || p.Running() {
			t.Errorf("Stop took %s, running %v; want killed after the grace", took, p.Running())
		}
	})
	t.Run("kill", func(t *testing.T) {
		p := startSh(t, `exec sleep 10`)
		p.Kill()
		if p.Running() || p.ExitCode() != -1 {
			t.Errorf("after Kill running %v, exit code %d; want gone, -1", p.Running(), p.ExitCode())
		}
	})
	t.Run("wait for HTTP", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/healthz" {
				http.NotFound(w, r)
			}
		})}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		p := startSh(t, `exec sleep 10`)
		if err := p.WaitHTTP(ctx, "http://"+ln.Addr().String()+"/healthz", 5*time.Second); err != nil {
			t.Errorf("WaitHTTP(/healthz) = %v", err)
		}
		if err := p.WaitHTTP(ctx, "http://"+ln.Addr().String()+"/nothing", 100*time.Millisecond); err == nil {
			t.Error("WaitHTTP(404) = nil error")
		}
	})
}

// TestStartReady: a start that finds its address taken is started again;
// another failure is not.
func TestStartReady(t *testing.T) {
	ready := func(p *Proc) error {
		_, err := p.Addr(context.Background(), "receiver", 5*time.Second)
		return err
	}
	t.Run("taken, then free", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "tried")
		script := fmt.Sprintf(`if [ -e %[1]s ]; then echo '{"msg":"receiver listening","addr":"127.0.0.1:4100"}'; exec sleep 10; `+
			`else touch %[1]s; echo 'listen 127.0.0.1:4100: bind: address already in use'; exit 1; fi`, marker)
		p, err := StartReady(Spec{Name: "sh", Path: "/bin/sh", Args: []string{"-c", script}}, ready)
		if err != nil {
			t.Fatalf("StartReady = %v; want the second start ready", err)
		}
		defer p.Kill()
		if _, err := os.Stat(marker); err != nil {
			t.Errorf("the first start did not run: %v", err)
		}
	})
	t.Run("other failure", func(t *testing.T) {
		count := filepath.Join(t.TempDir(), "count")
		script := fmt.Sprintf(`echo x >> %s; echo 'config: invalid'; exit 1`, count)
		if _, err := StartReady(Spec{Name: "sh", Path: "/bin/sh", Args: []string{"-c", script}}, ready); err == nil {
			t.Fatal("StartReady = nil error for a process that fails")
		}
		if b, _ := os.ReadFile(count); strings.Count(string(b), "x") != 1 {
			t.Errorf("started %d times; want once", strings.Count(string(b), "x"))
		}
	})
}

// TestKfake builds yidu-kfake once for concurrent askers, starts it, and
// stops it.
func TestKfake(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/yidu-kfake")
	}
	ctx := context.Background()
	var bins Binaries
	defer bins.Close()
	paths := make([]string, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range paths {
		wg.Go(func() { paths[i], errs[i] = bins.Path(ctx, "yidu-kfake") })
	}
	wg.Wait()
	for i := range paths {
		if errs[i] != nil || paths[i] != paths[0] {
			t.Fatalf("Path(yidu-kfake) = %q, %v; want one build (%q)", paths[i], errs[i], paths[0])
		}
	}
	p, addr, err := StartKfake(ctx, paths[0], "yidu.reads", 2)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Errorf("dial the broker at %s: %v", addr, err)
	} else {
		c.Close()
	}
	if err := p.Stop(5 * time.Second); err != nil {
		t.Error(err)
	}
	if err := bins.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(paths[0]); !os.IsNotExist(err) {
		t.Errorf("%s after Close: %v; want removed", paths[0], err)
	}
	if _, err := bins.Path(ctx, "no-such-command"); err == nil {
		t.Error("Path(no-such-command) = nil error")
	}
}
