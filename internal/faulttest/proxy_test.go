package faulttest

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// proxy forwards TCP connections to target until cut: then it closes every
// connection and stops listening, so clients see resets and refused
// connections, as when the MySQL server goes away; restore listens again
// on the same address.
type proxy struct {
	tb     testing.TB
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	// frozen: new connections are accepted and held, never forwarded
	// nor answered, as a server stopped with SIGSTOP leaves them.
	frozen bool
}

func newProxy(tb testing.TB, target string) *proxy {
	tb.Helper()
	p := &proxy{tb: tb, target: target, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	tb.Cleanup(p.cut)
	return p
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
}

func (p *proxy) pipe(c net.Conn) {
	p.mu.Lock()
	if p.frozen {
		p.conns[c] = struct{}{} // closed by thaw or cut
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // cut while dialing
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	copyAndClose := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
	}
	wg.Add(2)
	go copyAndClose(up, c)
	go copyAndClose(c, up)
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// cut closes the listener and every connection.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// restore listens on the same address again.
func (p *proxy) restore() {
	p.tb.Helper()
	var err error
	for range 50 {
		var ln net.Listener
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			p.serve(ln)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.tb.Fatalf("proxy: listen %s again: %v", p.addr, err)
}

// freeze closes every connection and holds the new ones unanswered until
// thaw: the server behind answers nothing, its port stays open.
func (p *proxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// thaw closes the held connections (their clients retry) and forwards
// the new ones again.
func (p *proxy) thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = false
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}
