// Package kfakeproc runs cmd/yidu-kfake, a kfake broker, as a child
// process, so Kafka does not share the Go runtime of the process being
// measured (cmd/yidu-bench, cmd/yidu-soak). Benchmark and soak only.
package kfakeproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Proc is a running yidu-kfake.
type Proc struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	done chan struct{}
	// Addr is the broker's address, as it printed it.
	Addr string
}

// Start starts bin (a yidu-kfake binary) with topic of partitions on a
// free loopback port and waits for it to print its address. It runs with
// -exit-on-eof: its stdin is a pipe only this process holds, so it exits
// when this process does, in any way.
func Start(ctx context.Context, bin, topic string, partitions int) (*Proc, error) {
	cmd := exec.Command(bin, "-listen", "127.0.0.1:0", "-topic", topic,
		"-partitions", strconv.Itoa(partitions), "-exit-on-eof")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start yidu-kfake: %w", err)
	}
	p := &Proc{cmd: cmd, in: in, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- strings.TrimSpace(sc.Text())
		}
		close(line)
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case addr, ok := <-line:
		if !ok || addr == "" {
			p.Stop()
			return nil, errors.New("yidu-kfake printed no address")
		}
		p.Addr = addr
		return p, nil
	case <-time.After(30 * time.Second):
		p.Stop()
		return nil, errors.New("yidu-kfake: no address within 30 s")
	case <-ctx.Done():
		p.Stop()
		return nil, ctx.Err()
	}
}

// Pid is the broker's process id (its CPU is measured).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Stop asks the broker to exit (stdin closed, SIGINT) and kills it after
// 5 s; it returns when the process is gone.
func (p *Proc) Stop() {
	_ = p.in.Close()
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
