package process

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/yidu-io/yidu/ledger"
	"log/slog"
	"net/http"
	"time"

	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/flushd"
	"github.com/yidu-io/yidu/internal/probe"
)

// flushStatement picks the form of flushd's batch UPDATE: mysql.dialect
// names the server, or with "auto" its VERSION() does (flushd.StatementFor).
func flushStatement(ctx context.Context, db *sql.DB, dialect string, log *slog.Logger) (flushd.Statement, error) {
	d, version := flushd.Dialect(dialect), ""
	if dialect == config.DialectAuto {
		vctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		v, err := flushd.ServerVersion(vctx, db)
		if err != nil {
			return 0, fmt.Errorf("flushd: mysql.dialect auto: %w", err)
		}
		d, version = flushd.DialectOf(v), v
	}
	st := flushd.StatementFor(d, version)
	log.Info("flushd statement", "dialect", d, "version", version, "statement", st.String())
	return st, nil
}

// orphanApplier adapts flushd.ApplyOrphansLedgered to tracker.OrphanApplier.
type orphanApplier struct {
	db *sql.DB
	l  *ledger.Ledger
}

func (o orphanApplier) ApplyOrphans(ctx context.Context, corpID, msgID string) (int, error) {
	if o.l == nil {
		return flushd.ApplyOrphans(ctx, o.db, corpID, msgID)
	}
	return flushd.ApplyOrphansLedgered(ctx, o.db, o.l, corpID, msgID)
}

// startFlushd builds flushd and starts its loop. async: flushDone was
// made by the caller (flushd starting in the background).
func (m *Main) startFlushd(ctx context.Context, roles Roles, async bool) error {
	cfg := m.Config
	log := m.Logger
	{
		kopts, err := KafkaOpts(cfg.Kafka, m.Registry, "consumer")
		if err != nil {
			return err
		}
		stmt, err := flushStatement(ctx, m.DB, cfg.MySQL.Dialect, log)
		if err != nil {
			return err
		}
		healer, err := bitmap.NewHealer(m.Store, m.Tracker, log)
		if err != nil {
			return fmt.Errorf("flushd: %w", err)
		}
		opts := FlushdOptions(cfg)
		opts.Statement, opts.Live, opts.Members, opts.KafkaOpts = stmt, healer, m.Mapper, kopts
		opts.Logger, opts.Registerer = log, m.Registry
		if m.Ledger != nil && !m.FlushdWithoutLedger {
			opts.Ledger = m.Ledger
			if opts.LockFirst, err = flushd.LockFirstFor(ctx, m.DB); err != nil {
				return fmt.Errorf("flushd: %w", err)
			}
		}
		f, err := flushd.New(m.DB, opts)
		if err != nil {
			return fmt.Errorf("flushd: %w", err)
		}
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		m.mu.Lock()
		if m.closing {
			m.mu.Unlock()
			cancel()
			return errors.New("flushd: closed before it started")
		}
		m.Flusher = f
		m.flushCancel = cancel
		m.mu.Unlock()
		if !async {
			m.flushDone = make(chan struct{})
		}
		go func() {
			defer close(m.flushDone)
			m.flushErr = f.Run(fctx)
		}()
		if m.Ledger != nil {
			g, err := m.loopGuard("checkpoint", log, time.Now)
			if err != nil {
				return fmt.Errorf("flushd: %w", err)
			}
			go checkpointLoop(fctx, m.Ledger, g)
		}
		log.Info("flushd consuming", "topic", cfg.Kafka.Topic, "group", cfg.Kafka.Group)
		if !roles.Receiver && !roles.Dashboard && cfg.Flushd.Listen != "" {
			// flushd alone has no HTTP of its own: serve its probes and
			// metrics (lag, pending, retries) for the orchestrator.
			alive := func() error {
				select {
				case <-m.flushDone:
					return errors.New("flushd stopped")
				default:
					return nil
				}
			}
			addr, err := m.serve(opsServer(), cfg.Flushd.Listen, m.withProbes(http.NotFoundHandler(), probe.Options{}, alive))
			if err != nil {
				return fmt.Errorf("flushd: %w", err)
			}
			m.FlushdAddr = addr
			log.Info("flushd metrics listening", "addr", addr)
		}
	}
	return nil
}
