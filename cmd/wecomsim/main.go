// Command wecomsim plays the WeCom platform for tests, demos and load runs:
// it pushes signed, encrypted callbacks at a receiver (-target) with WeCom's
// retry rules at a given rate and concurrency, and serves a fake WeCom API
// (-api-listen) with a synthetic company, so sending, reminders and
// directory sync work without the internet. The fake API is as strict as
// WeCom about secrets: gettoken takes the app's secret (-api-secret) and,
// when given, the contacts-sync secret (-contacts-secret), which alone may
// call user/list_id. It stops by itself: after the push when there is no
// API to serve, else after -duration.
//
//	wecomsim -target http://127.0.0.1:8080/callback/hr -corp wx… -agent 1000002 \
//	    -token … -aes-key … -users 2000 -msgid notice1 -rate 500 -concurrency 16
//	wecomsim -api-listen 127.0.0.1:9000 -api-secret s3 -users 2000   # for yidu directory sync
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/wecomsim"
)

func main() {
	m := NewMain()
	if err := m.ParseFlags(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "wecomsim:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, m.Duration)
	defer cancel()
	err := m.Run(ctx)
	if err == nil {
		m.Wait(ctx)
	}
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	if err == nil && m.Stats.Failures > 0 {
		err = fmt.Errorf("%d callbacks failed", m.Stats.Failures)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "wecomsim:", err)
		os.Exit(1)
	}
}

// Main is the program: flags in, servers and pushes out.
type Main struct {
	Target      string
	App         wecomsim.App
	Rate        float64
	Concurrency int
	Tries       int
	Backoff     time.Duration
	Users       int
	Departments int
	MsgID       string
	Key         string
	Events      string
	APIListen   string
	APISecret   string
	// ContactsSecret enables the contacts-sync secret on the fake API.
	ContactsSecret string
	// Duration bounds the whole run.
	Duration time.Duration

	Stdout io.Writer
	Logger *slog.Logger
	// Stats is the push's outcome once Wait returned.
	Stats wecomsim.Stats

	api    *http.Server
	apiLn  net.Listener
	pushed chan struct{}
}

// NewMain returns a Main with the defaults of its flags.
func NewMain() *Main {
	return &Main{Stdout: os.Stdout, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}
}

// ParseFlags reads args into m.
func (m *Main) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("wecomsim", flag.ContinueOnError)
	fs.StringVar(&m.Target, "target", "", "receiver callback URL to push at (empty: no pushing)")
	fs.StringVar(&m.App.CorpID, "corp", "ww0000000000000001", "CorpID (the ReceiveId)")
	fs.Int64Var(&m.App.AgentID, "agent", 1000002, "AgentID")
	fs.StringVar(&m.App.Token, "token", "", "app callback Token")
	fs.StringVar(&m.App.EncodingAESKey, "aes-key", "", "app EncodingAESKey (43 characters)")
	fs.Float64Var(&m.Rate, "rate", 200, "callbacks per second (0: unlimited)")
	fs.IntVar(&m.Concurrency, "concurrency", 8, "most callbacks in flight")
	fs.IntVar(&m.Tries, "tries", wecomsim.DefaultTries, "attempts per callback in all (WeCom: 3)")
	fs.DurationVar(&m.Backoff, "backoff", 500*time.Millisecond, "pause before a retry")
	fs.IntVar(&m.Users, "users", 1000, "members u000000… of the synthetic company")
	fs.IntVar(&m.Departments, "departments", 60, "departments of the synthetic company")
	fs.StringVar(&m.MsgID, "msgid", "notice1", "tracked message whose cards are pressed (task_id <msgid>@<batch>)")
	fs.StringVar(&m.Key, "key", "read", "button key pressed")
	fs.StringVar(&m.Events, "events", "card", "events to push: card, enter_agent or contact")
	fs.StringVar(&m.APIListen, "api-listen", "", "serve the fake WeCom API here (e.g. 127.0.0.1:0)")
	fs.StringVar(&m.APISecret, "api-secret", "", "the app's secret gettoken accepts (required with -api-listen)")
	fs.StringVar(&m.ContactsSecret, "contacts-secret", "", "the corp's contacts-sync secret gettoken accepts (empty: none; user/list_id then refuses every token)")
	fs.DurationVar(&m.Duration, "duration", 10*time.Minute, "stop after this long at the latest")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if m.Target == "" && m.APIListen == "" {
		return errors.New("nothing to do: give -target, -api-listen or both")
	}
	if m.Duration <= 0 {
		return errors.New("-duration must be positive")
	}
	if m.APIListen != "" && m.APISecret == "" {
		return errors.New("-api-listen needs -api-secret: the fake WeCom, like WeCom, gives no token without a secret")
	}
	if m.ContactsSecret != "" && m.ContactsSecret == m.APISecret {
		return errors.New("-contacts-secret must differ from -api-secret: WeCom's contacts-sync secret is another one")
	}
	return nil
}

func (m *Main) events(now time.Time) ([]wecomsim.Event, error) {
	users := make([]string, m.Users)
	for i := range users {
		users[i] = wecomsim.UserID(i)
	}
	switch m.Events {
	case "card":
		return wecomsim.CardReads(users, m.MsgID, m.Key, now, 0), nil
	case "enter_agent":
		return wecomsim.EnterAgents(users, now, 0), nil
	case "contact":
		return wecomsim.ContactChanges(users, now, 0), nil
	}
	return nil, fmt.Errorf("-events %q: want card, enter_agent or contact", m.Events)
}

// Run starts the API server and the push in the background and returns.
func (m *Main) Run(ctx context.Context) error {
	logger := m.Logger.With("component", "wecomsim")
	m.pushed = make(chan struct{})
	if m.APIListen != "" {
		ln, err := net.Listen("tcp", m.APIListen)
		if err != nil {
			return fmt.Errorf("api listen: %w", err)
		}
		m.apiLn = ln
		corp := wecomsim.Company(m.App.CorpID, m.App.AgentID, m.APISecret, m.Users, m.Departments)
		corp.ContactsSecret = m.ContactsSecret
		fake := fakewecom.New(corp)
		m.api = &http.Server{Handler: fake, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := m.api.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error("fake WeCom API stopped", "err", err)
			}
		}()
		fmt.Fprintf(m.Stdout, "fake WeCom API on http://%s (%d users, %d departments)\n", ln.Addr(), m.Users, m.Departments)
	}
	if m.Target == "" {
		return nil
	}
	p, err := wecomsim.NewPusher(wecomsim.Options{
		Target: m.Target, App: m.App, Rate: m.Rate, Burst: max(1, int(m.Rate/10)),
		Concurrency: m.Concurrency, Tries: m.Tries, Backoff: m.Backoff, Logger: m.Logger,
	})
	if err != nil {
		return err
	}
	evs, err := m.events(time.Now())
	if err != nil {
		return err
	}
	reqs, err := p.Build(evs)
	if err != nil {
		return err
	}
	go func() {
		defer close(m.pushed)
		m.Stats = p.Push(ctx, reqs)
		fmt.Fprintln(m.Stdout, m.Stats)
	}()
	return nil
}

// Wait returns when the run is over: the push finished and, when the API is
// served, ctx ended (-duration or a signal).
func (m *Main) Wait(ctx context.Context) {
	if m.Target != "" {
		select {
		case <-m.pushed:
		case <-ctx.Done():
			<-m.pushed // Push returns promptly once ctx ends
		}
	}
	if m.api != nil {
		<-ctx.Done()
	}
}

// APIAddr returns the fake API's address once Run started it.
func (m *Main) APIAddr() string {
	if m.apiLn == nil {
		return ""
	}
	return m.apiLn.Addr().String()
}

// Close stops the API server, letting requests in flight finish.
func (m *Main) Close() error {
	if m.api == nil {
		return nil
	}
	// A fresh context: the run's context has usually ended by now.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return m.api.Shutdown(ctx)
}
