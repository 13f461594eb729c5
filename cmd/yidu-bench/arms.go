package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-sql-driver/mysql"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/cmd/internal/process"
	"github.com/yidu-io/yidu/cmd/yidu-bench/naive"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/rig"
)

// ceiling answers 200 after reading the body: what the machine and the
// generator can do at all through chi and the receiver's server settings.
func (b *bench) ceiling(ctx context.Context) (ArmResult, error) {
	r := chi.NewRouter()
	r.Post("/wecom/callback/{app}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	})
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	addr, stop, err := serve(r)
	if err != nil {
		return ArmResult{}, err
	}
	defer stop()
	w, err := b.workload("storm-ceiling", 1)
	if err != nil {
		return ArmResult{}, err
	}
	return b.measure(ctx, arm{name: armCeiling, host: addr}, w)
}

// naive runs the design yidu replaces (package naive).
func (b *bench) naive(ctx context.Context) (ArmResult, error) {
	const msgID = "storm-naive"
	n, err := naive.Setup(ctx, b.db, b.app, msgID, b.sentAt)
	if err != nil {
		return ArmResult{}, err
	}
	if n != int64(b.cfg.Recipients) {
		return ArmResult{}, fmt.Errorf("naive setup: %d recipient rows; want %d", n, b.cfg.Recipients)
	}
	c, _ := mysql.ParseDSN(b.dsn)
	c.InterpolateParams = true
	db, err := process.OpenDB(c.FormatDSN())
	if err != nil {
		return ArmResult{}, err
	}
	defer db.Close()
	ids, err := idmap.New(db, idmap.Options{Logger: b.cfg.Logger})
	if err != nil {
		return ArmResult{}, err
	}
	if _, err := ids.Warm(ctx, b.app.CorpID); err != nil {
		return ArmResult{}, err
	}
	srv, err := naive.New(naive.Options{App: b.app, DB: db, IDs: ids, Logger: b.cfg.Logger})
	if err != nil {
		return ArmResult{}, err
	}
	addr, stop, err := serve(srv.Routes())
	if err != nil {
		return ArmResult{}, err
	}
	defer stop()
	w, err := b.workload(msgID, 2)
	if err != nil {
		return ArmResult{}, err
	}
	res, err := b.measure(ctx, arm{
		name: armNaive, host: addr,
		dashboard: func(ctx context.Context) (int64, error) { return naive.ReadCount(ctx, b.db, b.app.CorpID, msgID) },
		mysql:     func(ctx context.Context) (int64, error) { return b.mysqlReads(ctx, msgID) },
		written:   func() int64 { return srv.Stats().Reads },
		statements: func() (int64, int64) {
			s := srv.Stats()
			return s.Updates, s.Transactions
		},
	}, w)
	if err != nil {
		return res, err
	}
	problems := b.verify(ctx, msgID)
	if got, err := naive.ReadCount(ctx, b.db, b.app.CorpID, msgID); err != nil || got != int64(b.cfg.Recipients) {
		problems = append(problems, fmt.Sprintf("read_count %d (err %v); want %d", got, err, b.cfg.Recipients))
	}
	setExact(&res, problems)
	return res, nil
}

func setExact(r *ArmResult, problems []string) {
	ok := len(problems) == 0 && r.Failed == 0
	if r.Failed > 0 {
		problems = append(problems, fmt.Sprintf("%d callbacks never answered 200", r.Failed))
	}
	r.Exact = &ok
	r.ExactDetail = strings.Join(problems, "; ")
	if ok {
		r.ExactDetail = "R reads, each read_time one of the member's CreateTimes"
	}
}

// yidu runs the real pipeline: receiver, dashboard and flushd in this
// process (cmd/internal/yidu), Kafka in yidu-kfake.
func (b *bench) yidu(ctx context.Context) (ArmResult, error) {
	const msgID = "storm-yidu"
	cfg := b.yiduConfig("")
	m, stop, err := b.runYidu(ctx, cfg, b.cfg.NoLedger)
	if err != nil {
		return ArmResult{}, err
	}
	defer stop()
	start := time.Now()
	if err := b.register(ctx, m.DashboardAddr, msgID); err != nil {
		return ArmResult{}, err
	}
	b.logf("registered %s for %d recipients in %s", msgID, b.cfg.Recipients, time.Since(start).Round(time.Millisecond))
	w, err := b.workload(msgID, 3)
	if err != nil {
		return ArmResult{}, err
	}
	dash := &http.Client{Timeout: 5 * time.Second}
	res, err := b.measure(ctx, arm{
		name: armYidu, host: m.ReceiverAddr, pids: b.kafkaPids(), profile: b.cfg.CPUProfile,
		dashboard: func(ctx context.Context) (int64, error) {
			p, err := progress(ctx, dash, m.DashboardAddr, msgID)
			if err != nil || p.Recipients != int64(b.cfg.Recipients) {
				return -1, err
			}
			return p.Read, nil
		},
		mysql: func(ctx context.Context) (int64, error) { return b.mysqlReads(ctx, msgID) },
		// Rows flushd's UPDATEs changed, counted after each statement
		// committed; every read of the storm is a card press, so each
		// changed row is a new read.
		written: func() int64 { return int64(counter(m.Registry, "yidu_flushd_rows_updated_total")) },
		statements: func() (int64, int64) {
			return int64(counter(m.Registry, "yidu_flushd_batches_total")), 0
		},
	}, w)
	if err != nil {
		return res, err
	}
	res.RedisMsgBytes, res.RedisDedupKeys, res.RedisDedupBytes = b.redisMemory(ctx, msgID)
	res.Counters = counters(m.Registry, "yidu_callback_requests_total", "yidu_callback_dedup_hits_total",
		"yidu_callback_dedup_errors_total", "yidu_callback_rate_limited_total", "yidu_bitmap_reads_total",
		"yidu_bitmap_queue_full_total", "yidu_bitmap_redis_errors_total", "yidu_bitmap_publish_errors_total",
		"yidu_bitmap_ack_errors_total", "yidu_flushd_batches_total", "yidu_flushd_rows_updated_total",
		"yidu_flushd_retries_total", "yidu_idmap_db_queries_total", "yidu_flushd_statement_seconds",
		"yidu_bitmap_publish_seconds", "yidu_bitmap_redis_roundtrip_seconds", "yidu_callback_duration_seconds")
	problems := b.verify(ctx, msgID)
	if p, err := progress(ctx, dash, m.DashboardAddr, msgID); err != nil || p.Read != int64(b.cfg.Recipients) || p.Recipients != int64(b.cfg.Recipients) {
		problems = append(problems, fmt.Sprintf("dashboard %+v (err %v); want %d of %d", p, err, b.cfg.Recipients, b.cfg.Recipients))
	}
	setExact(&res, problems)
	return res, nil
}

// yiduConfig is yidu's configuration in the yidu and page arms: the
// scratch database, Redis and Kafka of the bench, both listeners on a port
// of their own and the bench's app (secret: its secret, "" for none).
func (b *bench) yiduConfig(secret string) config.Config {
	cfg := config.Default()
	cfg.MySQL.DSN = b.dsn
	cfg.Redis.Addr = b.cfg.RedisAddr
	cfg.Redis.Prefix = b.prefix
	cfg.Redis.TTL = config.Duration(time.Hour) // the bench deletes them; this bounds a crash
	cfg.Kafka.Brokers = b.brokers
	cfg.Kafka.Group = "yidu-bench-" + rig.RandomHex(4)
	cfg.Flushd.Interval = config.Duration(b.cfg.FlushInterval)
	cfg.Receiver.Listen = "127.0.0.1:0"
	// The members exist before Run, so the receiver meets the storm with
	// its UserID cache filled (receiver.warm) unless -cold.
	cfg.Receiver.Warm = !b.cfg.Cold
	cfg.Dashboard.Listen = "127.0.0.1:0"
	cfg.Dashboard.Tokens = []config.Token{{Name: "bench", Token: apiToken, Corps: []string{b.app.CorpID}}}
	cfg.Apps = []config.App{{Name: b.app.Name, CorpID: b.app.CorpID, AgentID: b.app.AgentID, Token: b.app.Token,
		EncodingAESKey: b.app.EncodingAESKey, ReadButtonKey: b.app.ReadButtonKey, Secret: secret}}
	return cfg
}

// runYidu checks cfg and runs all of yidu with it (noLedger: flushd
// without the evidence ledger); stop closes it.
func (b *bench) runYidu(ctx context.Context, cfg config.Config, noLedger bool) (m *process.Main, stop func(), err error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	m = process.NewMain(cfg, b.cfg.Logger)
	m.FlushdWithoutLedger = noLedger
	if err := m.Run(ctx, process.All); err != nil {
		m.Close()
		return nil, nil, err
	}
	return m, func() {
		if err := m.Close(); err != nil {
			b.logf("yidu close: %v", err)
		}
	}, nil
}

// kafkaPids are the Kafka processes whose CPU an arm is charged.
func (b *bench) kafkaPids() []int {
	var pids []int
	if b.kfake != nil {
		pids = append(pids, b.kfake.Pid())
	}
	if b.ak != nil {
		pids = append(pids, b.ak.Pids()...)
	}
	return pids
}

// register registers msgID through the dashboard API for every member.
func (b *bench) register(ctx context.Context, dashAddr, msgID string) error {
	return b.postMessage(ctx, dashAddr, "register", map[string]any{
		"msgid": msgID, "app": b.app.Name, "title": "9:00 storm", "sent_at": b.sentAt,
		"audience": map[string]any{"all": true},
	})
}

// postMessage POSTs a notice to the dashboard API and checks that it was
// created for every member; what names the step in errors.
func (b *bench) postMessage(ctx context.Context, dashAddr, what string, msg map[string]any) error {
	body, _ := json.Marshal(msg)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+dashAddr+"/api/v1/messages", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+apiToken)
	req.Header.Set("Content-Type", "application/json")
	// A send to 100,000 on a loaded 2-core machine took over 5 min; ctx
	// (-timeout) bounds it too.
	resp, err := (&http.Client{Timeout: 15 * time.Minute}).Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("%s: %s: %s", what, resp.Status, out)
	}
	var m struct {
		Recipients int64 `json:"recipients"`
	}
	if err := json.Unmarshal(out, &m); err != nil || m.Recipients != int64(b.cfg.Recipients) {
		return fmt.Errorf("%s: %s; want %d recipients", what, out, b.cfg.Recipients)
	}
	return nil
}
