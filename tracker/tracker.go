// Package tracker owns tracked messages: it registers them (audience
// snapshot → message_read_record rows in MySQL, then the recipients bitmap in
// Redis), sends their template cards through WeCom when asked, reminds
// non-readers, and loads messages back from MySQL when Redis lost them.
//
// MySQL is written before Redis on purpose. A read can only be recorded for a
// message Redis knows, so once Redis has the message its rows already exist
// and flushd's UPDATE finds them; the only window where a delta precedes its
// row is a race with a concurrent registration, which flushd parks in
// read_orphans and Register applies (OrphanApplier) once the rows exist. A
// Redis failure after MySQL leaves a complete archive: the registration is
// repeated (idempotent) or bitmap.Recorder restores the keys from
// LoadMessage on demand.
package tracker

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/config"
)

// ErrInvalid is returned for input tracker refuses (bad msgid, empty or
// oversized audience, bad cursor); the dashboard answers 400. Nothing is
// written when it is returned.
var ErrInvalid = errors.New("tracker: invalid")

// ErrConflict is returned by Register when the msgid exists with another
// audience, title or app; the dashboard answers 409.
var ErrConflict = errors.New("tracker: message exists with different content")

// ErrRateLimited is returned by Register (with Send) and Remind when sending
// one more notice from the app would break WeCom's per-member limits
// (path 90236: 30 a minute, 1000 an hour per app and member); the dashboard
// answers 429. The registration itself is kept.
var ErrRateLimited = errors.New("tracker: app notice rate limit reached")

// ErrNoSender is returned when sending is asked for but Options.Sender is nil.
var ErrNoSender = errors.New("tracker: no sender configured")

// Directory is what tracker needs from idmap.Mapper: uids for UserIDs, the
// member sets an audience expands to, and UserIDs back for sending.
// Declared here so idmap never imports tracker.
type Directory interface {
	Assign(ctx context.Context, corpID string, userIDs []string) (map[string]uint32, error)
	DepartmentMembers(ctx context.Context, corpID string, deptIDs []int64, recursive bool) (*roaring.Bitmap, error)
	AllMembers(ctx context.Context, corpID string) (*roaring.Bitmap, error)
	UserIDs(ctx context.Context, corpID string, uids []uint32) (map[uint32]string, error)
}

// Store is what tracker needs from bitmap.Store.
type Store interface {
	PutMessage(ctx context.Context, m bitmap.Message, recipients *roaring.Bitmap) error
	RestoreMessage(ctx context.Context, m bitmap.Message, recipients, read *roaring.Bitmap) error
	MessageMeta(ctx context.Context, corpID, msgID string) (bitmap.Message, bool, error)
}

// OrphanApplier applies reads that flushd parked in read_orphans because
// they arrived before the message's rows (flushd provides it).
type OrphanApplier interface {
	ApplyOrphans(ctx context.Context, corpID, msgID string) (int, error)
}

// Options are Registry's optional dependencies.
type Options struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Sender posts message/send requests; nil disables Send and Remind.
	Sender Sender
	// OrphanApplier, when set, runs after every completed registration.
	OrphanApplier OrphanApplier
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
	// Apps gives Remind each app's read_button_key.
	Apps []config.App
	// Retry bounds the backoff of batches WeCom refused before delivering
	// (zero: DefaultRetry).
	Retry Retry
}

// Retry is the capped exponential backoff for refused send batches.
type Retry struct {
	Attempts int
	Initial  time.Duration
	Max      time.Duration
}

// DefaultRetry is used when Options.Retry is zero.
var DefaultRetry = Retry{Attempts: 5, Initial: time.Second, Max: 30 * time.Second}

// Registry registers, sends and loads tracked messages (MySQL + Redis).
type Registry struct {
	db      *sql.DB
	ids     Directory
	store   Store
	sender  Sender
	orphans OrphanApplier
	log     *slog.Logger
	met     *metrics
	now     func() time.Time
	retry   Retry
	// buttonKeys maps app name → read_button_key, for reminders.
	buttonKeys map[string]string

	mu      sync.Mutex
	notices map[string][]time.Time // app name → recent notice times (rate limit)
}

// New returns a Registry over db (the migrated yidu schema; the DSN must set
// parseTime=true and loc=UTC), ids and store.
func New(db *sql.DB, ids Directory, store Store, opts Options) *Registry {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Retry.Attempts <= 0 {
		opts.Retry = DefaultRetry
	}
	keys := map[string]string{}
	for _, a := range opts.Apps {
		keys[a.Name] = a.ReadButtonKey
	}
	return &Registry{
		buttonKeys: keys,
		db:         db,
		ids:        ids,
		store:      store,
		sender:     opts.Sender,
		orphans:    opts.OrphanApplier,
		log:        opts.Logger.With("component", "tracker"),
		met:        newMetrics(opts.Registerer),
		now:        opts.Now,
		retry:      opts.Retry,
		notices:    map[string][]time.Time{},
	}
}

type metrics struct {
	registrations    *prometheus.CounterVec
	insertStatements prometheus.Counter
	insertedRows     prometheus.Counter
	registerSeconds  prometheus.Histogram
	sendBatches      *prometheus.CounterVec
	invalidUsers     prometheus.Counter
	orphanErrors     prometheus.Counter
}

// Register outcomes and send statuses, pre-set to 0.
var (
	registerResults = []string{"created", "existing", "resumed", "conflict", "invalid", "error"}
	sendKinds       = []string{kindSend, kindRemind}
	sendStatuses    = []string{statusSent, statusRefused, statusUnsent, statusUnknown}
)

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		registrations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "yidu_tracker_registrations_total",
			Help: "Register calls by result.",
		}, []string{"result"}),
		insertStatements: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "yidu_tracker_recipient_insert_statements_total",
			Help: "Multi-row INSERT IGNORE statements into message_read_record.",
		}),
		insertedRows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "yidu_tracker_recipient_rows_total",
			Help: "Recipient rows written (new rows only).",
		}),
		registerSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "yidu_tracker_register_seconds",
			Help:    "Time to register a message (MySQL + Redis, without sending).",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}),
		sendBatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "yidu_tracker_send_batches_total",
			Help: "message/send calls by kind (send, remind) and final status.",
		}, []string{"kind", "status"}),
		invalidUsers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "yidu_tracker_send_invalid_users_total",
			Help: "UserIDs WeCom reported as invaliduser.",
		}),
		orphanErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "yidu_tracker_orphan_apply_errors_total",
			Help: "Failed OrphanApplier calls after a registration.",
		}),
	}
	for _, r := range registerResults {
		m.registrations.WithLabelValues(r)
	}
	for _, k := range sendKinds {
		for _, s := range sendStatuses {
			m.sendBatches.WithLabelValues(k, s)
		}
	}
	reg.MustRegister(m.registrations, m.insertStatements, m.insertedRows, m.registerSeconds,
		m.sendBatches, m.invalidUsers, m.orphanErrors)
	return m
}
