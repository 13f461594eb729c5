package rig

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// tailLines is how much of a child's output a Proc keeps: enough to say
// why it failed.
const tailLines = 100

// Spec is a child process to start.
type Spec struct {
	// Name names the process in errors ("receiver-1", "yidu serve").
	Name string
	Path string
	Args []string
	// Env is the child's whole environment; nil passes this process's.
	Env []string
	// Echo, when set, receives a copy of the child's output (stdout and
	// stderr, line by line).
	Echo io.Writer
	// HoldStdin gives the child a stdin pipe only this process holds: it
	// closes when this process exits in any way, even by SIGKILL
	// (yidu-kfake -exit-on-eof), and Stop closes it first.
	HoldStdin bool
	// Announce reads an address announcement off one line of output;
	// Proc.Addr waits for it. Nil reads yidu's log line
	// {"msg":"<what> listening","addr":"<addr>"}: the child binds
	// 127.0.0.1:0 and says which port it got, so no port is picked by
	// one process and bound by another.
	Announce func(line string) (what, addr string, ok bool)
	// DieWithParent has the kernel kill the child when this process
	// exits in any way (PR_SET_PDEATHSIG), for a child that cannot
	// watch a held stdin: a JVM (Apache Kafka's broker).
	DieWithParent bool
}

// Proc is a running child process. Its output is read line by line: the
// last lines are kept for errors (Tail), announced addresses for Addr.
type Proc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.Closer
	done  chan struct{}
	err   error // Wait's, once done is closed

	mu    sync.Mutex
	tail  []string
	addrs map[string]string
	news  chan struct{} // closed and replaced when an address is announced
}

// Start starts s. The process runs until it exits or Stop or Kill ends
// it; nothing ends it when the caller's context does.
func Start(s Spec) (*Proc, error) {
	cmd := exec.Command(s.Path, s.Args...)
	cmd.Env = s.Env
	// One pipe for stdout and stderr, handed to the child as a file: Wait
	// does not wait for the reader, the reader sees EOF once the child
	// (and any descendant holding the pipe) has gone.
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	p := &Proc{name: s.Name, cmd: cmd, done: make(chan struct{}), addrs: map[string]string{}, news: make(chan struct{})}
	if s.HoldStdin {
		in, err := cmd.StdinPipe()
		if err != nil {
			pr.Close()
			pw.Close()
			return nil, err
		}
		p.stdin = in
	}
	if s.DieWithParent {
		// The signal follows the thread that forked the child, so that
		// thread stays locked while it does; Go keeps idle threads.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	pw.Close()
	announce := s.Announce
	if announce == nil {
		announce = yiduListening
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		p.read(pr, s.Echo, announce)
	}()
	go func() {
		p.err = cmd.Wait()
		select {
		case <-read:
		case <-time.After(time.Second):
			pr.Close() // a descendant still holds the pipe: stop reading
			<-read
		}
		close(p.done)
	}()
	return p, nil
}

// read takes the child's output until EOF.
func (p *Proc) read(r io.ReadCloser, echo io.Writer, announce func(string) (string, string, bool)) {
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			if echo != nil {
				_, _ = io.WriteString(echo, strings.TrimSuffix(line, "\n")+"\n")
			}
			p.keep(strings.TrimRight(line, "\r\n"), announce)
		}
		if err != nil {
			return
		}
	}
}

func (p *Proc) keep(line string, announce func(string) (string, string, bool)) {
	what, addr, ok := announce(line)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tail = append(p.tail, line); len(p.tail) > tailLines {
		p.tail = p.tail[len(p.tail)-tailLines:]
	}
	if ok {
		p.addrs[what] = addr
		close(p.news)
		p.news = make(chan struct{})
	}
}

// yiduListening reads yidu's JSON log line that says where a server
// listens: {"msg":"receiver listening","addr":"127.0.0.1:40123"}.
func yiduListening(line string) (what, addr string, ok bool) {
	if !strings.Contains(line, ` listening"`) {
		return "", "", false
	}
	var l struct{ Msg, Addr string }
	if json.Unmarshal([]byte(line), &l) != nil || l.Addr == "" {
		return "", "", false
	}
	what, ok = strings.CutSuffix(l.Msg, " listening")
	return what, l.Addr, ok
}

// Name is the process's name from its Spec.
func (p *Proc) Name() string { return p.name }

// Pid is the process id (its CPU and memory are measured).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited and its output is read.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is the process's exit status as Wait returned it, once Done is
// closed.
func (p *Proc) Err() error {
	<-p.done
	return p.err
}

// ExitCode is the exit code once Done is closed; -1 when a signal ended
// the process.
func (p *Proc) ExitCode() int {
	<-p.done
	return p.cmd.ProcessState.ExitCode()
}

// Running reports whether the process has not exited yet.
func (p *Proc) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Tail returns the last n lines of the process's output (at most the
// last 100 are kept).
func (p *Proc) Tail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail[max(0, len(p.tail)-n):], "\n")
}

// exited is the error for a process that exited while it was waited for.
func (p *Proc) exited() error {
	return fmt.Errorf("%s exited: %v\n%s", p.name, p.err, p.Tail(20))
}

// AddrInUse reports whether the process exited because the address it
// was to listen on was taken (EADDRINUSE in its output).
func (p *Proc) AddrInUse() bool {
	return !p.Running() && strings.Contains(p.Tail(tailLines), "address already in use")
}

// Addr waits up to timeout for the process to announce where what listens
// ("receiver", "dashboard"; see Spec.Announce) and returns the address.
func (p *Proc) Addr(ctx context.Context, what string, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		p.mu.Lock()
		addr, ok := p.addrs[what]
		news := p.news
		p.mu.Unlock()
		if ok {
			return addr, nil
		}
		select {
		case <-news:
		case <-p.done:
			p.mu.Lock()
			addr, ok = p.addrs[what]
			p.mu.Unlock()
			if ok {
				return addr, nil
			}
			return "", p.exited()
		case <-t.C:
			return "", fmt.Errorf("%s: no %s address within %s\n%s", p.name, what, timeout, p.Tail(20))
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// WaitHTTP polls url every 20 ms until it answers 200, the process exits
// or timeout passes.
func (p *Proc) WaitHTTP(ctx context.Context, url string, timeout time.Duration) error {
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(timeout)
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = errors.New(resp.Status)
		}
		last = err
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %s never answered 200 within %s (%v)\n%s", p.name, url, timeout, last, p.Tail(20))
		}
		select {
		case <-p.done:
			return p.exited()
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Kill kills the process with SIGKILL, as the OOM killer or a lost host
// would (no drain, no deferred anything), and waits for it to be gone.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop asks the process to exit (its held stdin closed, SIGTERM) and
// kills it when it has not within grace; the error says it had to. It
// returns when the process is gone.
func (p *Proc) Stop(grace time.Duration) error {
	if p.stdin != nil {
		_ = p.stdin.Close()
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		p.Kill()
		return fmt.Errorf("%s did not stop within %s of SIGTERM: killed", p.name, grace)
	}
}

// StartReady starts s and calls ready on the process (wait for its
// address, for its health check). When the process exited because its
// listen address was taken, it starts it again, up to 50 times 100 ms
// apart: a restart on the address a killed process had (which its
// clients keep calling) may find the port not free yet, or taken by
// another process for a moment. A process started on 127.0.0.1:0 is
// never refused. On any other failure the process is killed and the
// error returned.
func StartReady(s Spec, ready func(*Proc) error) (*Proc, error) {
	for try := 1; ; try++ {
		p, err := Start(s)
		if err != nil {
			return nil, err
		}
		err = ready(p)
		if err == nil {
			return p, nil
		}
		p.Kill()
		if !p.AddrInUse() || try == 50 {
			return nil, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
