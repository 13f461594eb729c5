// Package process builds yidu's parts from a configuration and runs them: the
// receiver, the dashboard and flushd, alone or together. cmd/yidu (the
// production binary) and cmd/yidu-demo share it; it never starts an
// embedded server itself.
//
// Shape (benbjohnson/wtf): NewMain, Run(ctx) that starts and returns, Close
// that stops in dependency order: HTTP servers first (with a fresh timeout
// context, so in-flight callbacks finish), then the read path they feed,
// then flushd (which drains and commits), then the connections.
package process

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/yidu-io/yidu/ledger"
	"github.com/yidu-io/yidu/page"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/callback"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/dashboard"
	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/flushd"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/jitter"
	"github.com/yidu-io/yidu/internal/loop"
	"github.com/yidu-io/yidu/internal/probe"
	"github.com/yidu-io/yidu/tracker"
)

// Roles says which parts Run starts.
type Roles struct {
	Receiver  bool
	Dashboard bool
	Flushd    bool
}

// All is every role: `yidu serve`.
var All = Roles{Receiver: true, Dashboard: true, Flushd: true}

// Main is one running yidu process.
type Main struct {
	Config config.Config
	Logger *slog.Logger
	// Registry collects every metric; /metrics serves it.
	Registry *prometheus.Registry
	// Sender overrides the WeCom sender (tests and the demo's fake WeCom);
	// nil builds one from the apps' secrets.
	Sender tracker.Sender

	// Set by Run.
	DB *sql.DB
	// ReceiverDB is the receiver's own pool when it runs beside other
	// roles (yidu serve); nil when the receiver uses DB.
	ReceiverDB *sql.DB
	Redis      redis.UniversalClient
	Store      *bitmap.Store
	Producer   *delta.Producer
	// Spool is the receiver's local spool in front of Producer, with
	// receiver.spool_dir.
	Spool    *delta.Spool
	Recorder *bitmap.Recorder
	Mapper   *idmap.Mapper
	// ReceiverMapper is the receiver's idmap: Mapper, or its own over the
	// receiver's pool (openReceiverPool); WarmReceiver fills its cache.
	ReceiverMapper *idmap.Mapper
	Tracker        *tracker.Registry
	// Ledger is the evidence ledger (issue 40): flushd and the tracker
	// append to it in their transactions.
	Ledger *ledger.Ledger
	// FlushdWithoutLedger makes flushd write reads without ledger entries
	// (each batch its own statement, as before issue 40). Only
	// yidu-bench's comparison arm sets it: it measures what the ledger
	// adds to flushd's cost. Set before Run.
	FlushdWithoutLedger bool
	// wecomSender is the sender the Tracker uses (Sender, or WeCom's):
	// approval cards go through it too (issue 41).
	wecomSender tracker.Sender
	Flusher     *flushd.Flusher
	Receiver    *callback.Receiver
	Dashboard   *dashboard.Server

	// ReceiverAddr and DashboardAddr are the bound addresses (":0" resolved).
	ReceiverAddr  string
	DashboardAddr string
	// FlushdAddr is flushd's probe and metrics address when it runs alone.
	FlushdAddr string

	dsn         string
	ready       *prometheus.GaugeVec
	servers     []*http.Server
	flushCancel context.CancelFunc
	flushDone   chan struct{}
	flushErr    error
	closeOnce   sync.Once
	closeErr    error

	// campaignCancel, campaignDone: the scheduled-notice Runner of the
	// dashboard role.
	campaignCancel context.CancelFunc
	campaignDone   chan struct{}
	// bg lives until Close: the receiver's background start work (Kafka
	// check, UserID warm-up) and, beside the receiver, flushd's start.
	bg       context.Context
	bgCancel context.CancelFunc
	warmDone chan struct{}
	// verifyName and verifyBody: wecom.verify_file, served at the root of
	// the receiver and the dashboard.
	verifyName string
	verifyBody []byte
	mu         sync.Mutex // guards closing, Flusher and flushCancel once Run returned
	closing    bool

	// PageSessions are the reading page's sessions, which the directory
	// ends when a member leaves.
	PageSessions *page.Sessions

	// wing is the notice side, built once for the dashboard and the
	// receiver (notices).
	wing *noticeWing
}

// NewMain returns a Main for cfg logging to logger. cfg's approvers are
// typed as Load types them (config.TypeApprovers), however cfg was made.
func NewMain(cfg config.Config, logger *slog.Logger) *Main {
	cfg.Apps = slices.Clone(cfg.Apps) // TypeApprovers writes the caller's slice otherwise
	cfg.TypeApprovers()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoGauge())
	ready, _ := probe.NewStatus(reg) // a fresh registry: cannot collide
	return &Main{Config: cfg, Logger: logger, Registry: reg, ready: ready}
}

// Run opens the connections and starts the roles; it returns once they
// are listening. Close stops them.
//
// With the receiver role nothing waits for a server before the receiver
// listens (docs/reliability.md, Starting in an outage): WeCom gives a
// callback three tries 5 s apart, and a receiver that exits or waits
// while Redis, MySQL or Kafka is down loses the reads of those 15 s. The
// reads go through the degraded paths meanwhile (unmarked without Redis,
// by UserID without MySQL, to the spool without Kafka); the Kafka
// credential check and the UserID warm-up run in the background with
// retries, and so does flushd's start beside it (yidu serve). flushd or
// the dashboard alone wait for their servers as before.
func (m *Main) Run(ctx context.Context, roles Roles) error {
	m.bg, m.bgCancel = context.WithCancel(context.WithoutCancel(ctx))
	if err := m.open(); err != nil {
		return err
	}
	cfg := m.Config
	log := m.Logger
	var err error
	if m.verifyName, m.verifyBody, err = cfg.WeCom.ReadVerifyFile(); err != nil {
		return err
	}
	if !roles.Receiver {
		if err := m.ping(ctx); err != nil {
			return err
		}
	}
	if roles.Receiver {
		go func() {
			// A refused credential cannot heal by itself: say so loudly,
			// but keep spooling (the spool forwards once it is fixed).
			if err := CheckKafka(m.bg, cfg.Kafka, 10*time.Second); err != nil {
				log.Error("receiver: kafka check failed; reads are spooled until it passes", "err", err)
			}
		}()
	} else if roles.Flushd {
		if err := CheckKafka(ctx, cfg.Kafka, 10*time.Second); err != nil {
			return err
		}
	}
	if roles.Receiver {
		if err := m.startReceiver(roles); err != nil {
			return err
		}
	}
	if roles.Dashboard {
		if err := m.startDashboard(ctx); err != nil {
			return err
		}
	}
	if roles.Flushd {
		if roles.Receiver {
			// Beside the receiver: flushd waits for MySQL in the
			// background, the receiver is already listening.
			m.flushDone = make(chan struct{})
			go func() {
				if err := m.waitFor(m.bg, "mysql", func(ctx context.Context) error { return m.DB.PingContext(ctx) }); err != nil {
					close(m.flushDone) // Close came first: nothing started
					return
				}
				if err := m.startFlushd(m.bg, roles, true); err != nil {
					m.flushErr = err
					close(m.flushDone)
				}
			}()
			return nil
		}
		return m.startFlushd(ctx, roles, false)
	}
	return nil
}

// waitFor retries check (each try bounded by 10 s) with jittered
// exponential backoff from 250 ms to 10 s until it passes; it returns
// ctx's error if ctx ends first. what names the dependency in the log.
func (m *Main) waitFor(ctx context.Context, what string, check func(context.Context) error) error {
	backoff := 250 * time.Millisecond
	for warned := false; ; {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := check(cctx)
		cancel()
		if err == nil {
			if warned {
				m.Logger.Info("dependency is back", "dependency", what)
			}
			return nil
		}
		if !warned {
			m.Logger.Warn("dependency is down; retrying in the background", "dependency", what, "err", err)
			warned = true
		}
		if err := jitter.Sleep(ctx, jitter.Apply(backoff)); err != nil {
			return err
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// loopGuard is the guard of one background loop of this process, its
// yidu_loop_* series on m.Registry (shared by every loop).
func (m *Main) loopGuard(name string, log *slog.Logger, now func() time.Time) (*loop.Guard, error) {
	return loop.New(name, loop.Options{Registerer: m.Registry, Logger: log, Now: now})
}

// WarmDone is closed once the receiver's background warm-up has loaded
// every corp (or Close stopped it); nil without the receiver role.
func (m *Main) WarmDone() <-chan struct{} { return m.warmDone }

// FlushdDone is closed when flushd's Run returns (nil without the flushd
// role); FlushdErr then says why. cmd watches it: flushd stopping on its
// own is a failure.
func (m *Main) FlushdDone() <-chan struct{} { return m.flushDone }

// FlushdErr is what flushd's Run returned, once FlushdDone is closed.
func (m *Main) FlushdErr() error { return m.flushErr }

// Close stops everything Run started, in dependency order, within about
// the flush drain timeout plus ten seconds.
func (m *Main) Close() error {
	m.closeOnce.Do(func() { m.closeErr = m.close() })
	return m.closeErr
}

func (m *Main) close() error {
	var errs []error
	m.mu.Lock()
	m.closing = true
	flushCancel := m.flushCancel
	m.mu.Unlock()
	if m.bgCancel != nil {
		m.bgCancel()
	}
	// A fresh context: the signal context is already cancelled, and
	// in-flight callbacks must finish (STYLE anti-pattern 1).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if m.Dashboard != nil {
		// Ends the SSE streams, which Shutdown would otherwise wait for.
		m.Dashboard.Close()
	}
	for _, s := range m.servers {
		if err := s.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err))
		}
	}
	if m.Store != nil {
		m.Store.Close()
	}
	if m.Spool != nil {
		if err := m.Spool.Close(); err != nil {
			errs = append(errs, fmt.Errorf("spool: %w", err))
		}
	}
	if m.Producer != nil {
		m.Producer.Close()
	}
	if m.campaignCancel != nil {
		// Sends in flight stop and release their lease: another replica
		// resumes them (loops.Runner.Run).
		m.campaignCancel()
		<-m.campaignDone
	}
	if flushCancel != nil {
		flushCancel()
	}
	if m.flushDone != nil {
		<-m.flushDone
		if err := m.flushErr; err != nil && flushCancel != nil {
			errs = append(errs, fmt.Errorf("flushd: %w", err))
		}
	}
	if m.Redis != nil {
		m.Redis.Close()
	}
	if m.ReceiverDB != nil {
		m.ReceiverDB.Close()
	}
	if m.DB != nil {
		m.DB.Close()
	}
	return errors.Join(errs...)
}
