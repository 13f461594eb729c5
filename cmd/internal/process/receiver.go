package process

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/callback"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/clientip"
	"github.com/yidu-io/yidu/internal/metric"
	"github.com/yidu-io/yidu/tracker"
	"github.com/yidu-io/yidu/wecom"
)

// startReceiver builds the receiver's read path (the Kafka producer, the
// spool, the recorder) and the callback receiver, and serves it.
func (m *Main) startReceiver(roles Roles) error {
	cfg := m.Config
	log := m.Logger
	TuneCollector(cfg.Receiver.GOGC, log)
	kopts, err := KafkaOpts(cfg.Kafka, m.Registry, "producer")
	if err != nil {
		return err
	}
	p, err := delta.NewProducer(cfg.Kafka.Brokers, cfg.Kafka.Topic, delta.ProducerOptions{Logger: log, Extra: kopts})
	if err != nil {
		return fmt.Errorf("kafka producer: %w", err)
	}
	m.Producer = p
	ids, loader := m.Mapper, m.Tracker
	if roles.Dashboard || roles.Flushd {
		if ids, loader, err = m.openReceiverPool(); err != nil {
			return err
		}
	}
	m.ReceiverMapper = ids
	pub, err := m.receiverSpool(p)
	if err != nil {
		return err
	}
	if m.Recorder, err = bitmap.NewRecorder(m.Store, ids, pub, loader, bitmap.RecorderOptions{
		Apps: DomainApps(cfg.Apps), Logger: log, Registerer: m.Registry,
	}); err != nil {
		return err
	}
	var oauth callback.OAuth // tracked links: only with receiver.public_url
	if cfg.Receiver.PublicURL != "" {
		oauth = wecom.NewOAuth(WeComApps(cfg.Apps))
		for _, a := range cfg.Apps {
			if a.Secret == "" {
				log.Warn("tracked links of this app are refused: it has no secret", "app", a.Name)
			}
		}
	}
	proxies, err := clientip.ParseProxies(cfg.Receiver.TrustedProxies)
	if err != nil {
		return fmt.Errorf("receiver: %w", err)
	}
	approvals, err := m.receiverApprovals()
	if err != nil {
		return fmt.Errorf("receiver: approvals: %w", err)
	}
	rcv, err := callback.New(m.Recorder, callback.Options{
		Approvals:       approvals,
		TrustedProxies:  proxies,
		Apps:            CallbackApps(cfg.Apps),
		Contacts:        ids,
		Dedup:           callback.NewRedisDedup(m.Redis, cfg.Redis.Prefix),
		Logger:          log,
		Registerer:      m.Registry,
		TimestampWindow: cfg.Receiver.TimestampWindow.D(),
		MaxBody:         cfg.Receiver.MaxBody,
		Timeout:         cfg.Receiver.Timeout.D(),
		MemberRate:      cfg.Receiver.MemberRate,
		MemberBurst:     cfg.Receiver.MemberBurst,
		PublicURL:       cfg.Receiver.PublicURL,
		OAuth:           oauth,
		OAuthBase:       cmp.Or(cfg.WeCom.OAuthBase, access.DefaultEndpoints.OAuthBase),
	})
	if err != nil {
		return fmt.Errorf("receiver: %w", err)
	}
	m.Receiver = rcv
	routes := rcv.Routes()
	// The reading page of notices with content (issue 39) beside the
	// tracked links, on receiver.public_url.
	if oauth != nil {
		pages, err := m.readingPage(cfg, ids, loader, oauth, log)
		if err != nil {
			return fmt.Errorf("receiver: reading page: %w", err)
		}
		if pages != nil {
			routes = pageFront(pages.Routes(), routes)
		}
	}
	if m.ReceiverAddr, err = m.serveRole("receiver", ReceiverServer(), cfg.Receiver.Listen, routes, m.readiness(cmp.Or(m.ReceiverDB, m.DB), true)); err != nil {
		return err
	}
	m.warmDone = make(chan struct{})
	if cfg.Receiver.Warm {
		g, err := m.loopGuard("warm", log, time.Now)
		if err != nil {
			return fmt.Errorf("receiver: %w", err)
		}
		go func() {
			defer close(m.warmDone)
			// A panic in the warm-up is logged and counted; the receiver
			// answers on from MySQL (a cold cache).
			_ = g.Run(m.bg, "userid warm-up", func(ctx context.Context) error { m.warmRetrying(ctx); return nil })
		}()
	} else {
		close(m.warmDone)
	}
	return nil
}

// receiverSpool is what the receiver publishes reads to: the spool in
// front of p (receiver.spool_dir), or p alone without one.
func (m *Main) receiverSpool(p *delta.Producer) (bitmap.Publisher, error) {
	cfg, log := m.Config, m.Logger
	dir := cfg.Receiver.SpoolDir
	if dir == config.SpoolOff || dir == "" {
		log.Warn("receiver: no spool (receiver.spool_dir off, or no data_dir): a read Kafka does not acknowledge is answered 503, and WeCom gives up after 3 tries")
		return p, nil
	}
	var err error
	if m.Spool, err = delta.NewSpool(p, delta.SpoolOptions{
		Dir: dir, MaxBytes: cfg.Receiver.SpoolMaxBytes, Logger: log, Registerer: m.Registry,
	}); err != nil {
		return nil, fmt.Errorf("receiver: %w", err)
	}
	log.Info("receiver spool", "dir", dir, "max_bytes", cfg.Receiver.SpoolMaxBytes)
	return m.Spool, nil
}

// CallbackApps returns what the receiver needs of the apps: the callback
// Token and EncodingAESKey, and the tracked-link key derived from the
// secret (never the secret itself).
func CallbackApps(apps []config.App) []callback.App {
	return each(apps, func(a config.App) callback.App {
		if a.ReadReply == "" {
			a.ReadReply = config.DefaultReadReply
		}
		return callback.App{App: domainApp(a), Token: a.Token, EncodingAESKey: a.EncodingAESKey,
			LinkKey: callback.LinkKey(a.Name, a.Secret), ReadReply: a.ReadReply}
	})
}

// openReceiverPool gives the receiver its own MySQL pool
// (mysql.receiver_conns) with its own idmap and message loader over it,
// when other roles share the process (yidu serve): however much work the
// dashboard and flushd give the main pool, the connections a WeCom
// callback needs stay free (docs/reliability.md, Hostile use, item 5).
// Their metrics count into the main ones' series (metric.Shared).
func (m *Main) openReceiverPool() (*idmap.Mapper, *tracker.Registry, error) {
	cfg := m.Config
	db, err := OpenDB(m.dsn)
	if err != nil {
		return nil, nil, err
	}
	m.ReceiverDB = db
	n := cmp.Or(cfg.MySQL.ReceiverConns, config.DefaultReceiverConns)
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	if err := m.Registry.Register(collectors.NewDBStatsCollector(db, "yidu_receiver")); err != nil {
		return nil, nil, fmt.Errorf("mysql: receiver pool metrics: %w", err)
	}
	reg := metric.Shared(m.Registry)
	var revoker idmap.Revoker // members who leave lose their reading sessions
	if m.PageSessions != nil {
		revoker = m.PageSessions
	}
	ids, err := idmap.New(db, idmap.Options{Logger: m.Logger, Registerer: reg, Revoker: revoker})
	if err != nil {
		return nil, nil, err
	}
	// Only loads messages: it sends nothing.
	loader, err := tracker.New(db, ids, m.Store, tracker.Options{
		Logger: m.Logger, Registerer: reg, Apps: DomainApps(cfg.Apps), Links: CardLinks(cfg),
	})
	if err != nil {
		return nil, nil, err
	}
	return ids, loader, nil
}

// WarmReceiver loads every member of the configured apps' corps into the
// receiver's idmap cache (one query per corp), so a storm right after a
// directory sync in this process (the demo's) does not pay one MySQL
// lookup per member inside WeCom's 5 s (each bounded by the recorder's
// 1 s mark timeout). A failure only leaves the cache to fill on demand:
// it is logged, never fatal. No-op without the receiver role. Run warms
// in the background once the receiver listens (warmRetrying) unless
// receiver.warm is false; members it has not met meanwhile are looked up
// on demand, and while MySQL is down they are what the outage path
// publishes by UserID.
func (m *Main) WarmReceiver(ctx context.Context) {
	if m.ReceiverMapper == nil {
		return
	}
	for _, corp := range m.corpIDs() {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second) // as the start's ping
		n, err := m.ReceiverMapper.Warm(wctx, corp)
		cancel()
		if err != nil {
			m.Logger.Warn("receiver: idmap warm failed; the cache fills on demand", "corp", corp, "err", err)
			continue
		}
		m.Logger.Debug("receiver: idmap warmed", "corp", corp, "members", n)
	}
}

// corpIDs returns the configured apps' corps, each once, in order.
func (m *Main) corpIDs() []string {
	var out []string
	for _, a := range m.Config.Apps {
		if !slices.Contains(out, a.CorpID) {
			out = append(out, a.CorpID)
		}
	}
	return out
}

// warmRetrying is WarmReceiver in the background, each corp retried
// with backoff (waitFor) until MySQL answers or Close.
func (m *Main) warmRetrying(ctx context.Context) {
	if m.ReceiverMapper == nil {
		return
	}
	for _, corp := range m.corpIDs() {
		n := 0
		err := m.waitFor(ctx, "mysql (receiver warm-up)", func(ctx context.Context) (err error) {
			n, err = m.ReceiverMapper.Warm(ctx, corp)
			return err
		})
		if err != nil {
			return // closing
		}
		m.Logger.Debug("receiver: idmap warmed", "corp", corp, "members", n)
	}
}
