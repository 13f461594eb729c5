// Package tracker owns tracked messages: it registers them (audience
// snapshot → message_read_record rows in MySQL, then the recipients bitmap in
// Redis), sends their template cards through WeCom when asked, reminds
// non-readers, recalls the cards, and loads messages back from MySQL when
// Redis lost them.
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
	"github.com/yidu-io/yidu/internal/opt"
	"github.com/yidu-io/yidu/ledger"
	"log/slog"
	"sync"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/jitter"
	"github.com/yidu-io/yidu/internal/metric"
	"github.com/yidu-io/yidu/wecom"
)

// Sender posts one message/send request body (doc path 90236), or recalls
// a sent message by WeCom's msgid (message/recall, doc path 96460), for the
// app (corpID, agentID); wecom.Sender implements it. An error wrapping
// wecom.ErrNotSent means the request never left: it is safe to send again.
// Any other error means the outcome is unknown (the request was written,
// the answer was lost): the batch is sent again at most once, identical,
// under WeCom's duplicate check (see Send), or members would get the card
// twice.
type Sender interface {
	SendMessage(ctx context.Context, corpID string, agentID int64, body []byte) (wecom.SendResult, error)
	RecallMessage(ctx context.Context, corpID string, agentID int64, msgID string) (wecom.RecallResult, error)
}

// LinkFunc returns the tracked link (docs/api.md, Tracked links) that
// opens target for message msgID of app and records who opened it. cmd
// builds it from the receiver's public URL and the app's link key: the
// tracker holds no secret.
type LinkFunc func(app yidu.App, msgID, target string) (string, error)

// Directory is what tracker needs from idmap.Mapper: uids for UserIDs, the
// member sets an audience expands to, and UserIDs back for sending.
// Declared here so idmap never imports tracker.
type Directory interface {
	// Known maps UserIDs of active members to their uids; it creates
	// nothing.
	Known(ctx context.Context, corpID string, userIDs []string) (map[string]uint32, error)
	// Expand expands an audience to its recipients (idmap.Mapper.Expand:
	// the one rule registration and the dashboard's preview share).
	Expand(ctx context.Context, corpID string, a yidu.Audience) (yidu.Expansion, error)
	UserIDs(ctx context.Context, corpID string, uids []uint32) (map[uint32]string, error)
}

// Store is what tracker needs from bitmap.Store.
type Store interface {
	PutMessage(ctx context.Context, m yidu.Message, recipients *roaring.Bitmap) error
	// RestoreReads puts a message Redis lost back from MySQL: its
	// recipients, readers and each signal's members (ORed in).
	RestoreReads(ctx context.Context, m yidu.Message, recipients, read *roaring.Bitmap, signals map[yidu.Signal]*roaring.Bitmap) error
	MessageMeta(ctx context.Context, corpID, msgID string) (yidu.Message, bool, error)
	// ResetAcknowledged empties a message's read and acknowledged
	// bitmaps (a material new version under read_rule acknowledged).
	ResetAcknowledged(ctx context.Context, corpID, msgID string) error
}

// Ledger appends evidence entries in the transaction of their facts
// (ledger.Ledger).
type Ledger interface {
	Append(ctx context.Context, tx ledger.Tx, corp string, facts []ledger.Fact) (uint64, error)
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
	// Ledger, when set, gets one evidence entry per recipient of each
	// send or reminder batch whose outcome is recorded, in the
	// transaction that records it (issue 40).
	Ledger Ledger
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
	// Apps gives Remind each app's read_button_key.
	Apps []yidu.App
	// Retry bounds the backoff of batches WeCom refused before delivering
	// (zero: DefaultRetry).
	Retry Retry
	// Links turns a message's url into the tracked link its card opens;
	// nil (no receiver public URL): the card opens the url itself and the
	// opening is not recorded.
	Links LinkFunc
	// DuplicateCheck is the duplicate_check_interval every card is sent
	// with (enable_duplicate_check, doc path 90236): within it an
	// identical request is not delivered twice, which makes the one
	// resend of a batch whose outcome is unknown safe. Default and
	// maximum MaxDuplicateCheck.
	DuplicateCheck time.Duration
	// Sleep waits d or until ctx ends (tests); default a timer.
	Sleep func(ctx context.Context, d time.Duration) error
}

// MaxDuplicateCheck is WeCom's longest duplicate_check_interval: 4 hours
// (message/send, doc path 90236).
const MaxDuplicateCheck = 4 * time.Hour

// Retry is the capped exponential backoff for refused send batches. A
// refusal for frequency (45009, 45033) waits at least a minute whatever
// the backoff: WeCom blocks the API for the minute (global error codes,
// doc path 90313).
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
	ledger  Ledger
	log     *slog.Logger
	met     *metrics
	now     func() time.Time
	retry   Retry
	links   LinkFunc
	dup     time.Duration
	sleep   func(ctx context.Context, d time.Duration) error
	// apps maps app name → app, for reminders (read_button_key) and links.
	apps map[string]yidu.App

	mu      sync.Mutex
	notices map[string][]time.Time // app name → recent notice times (rate limit)
}

// New returns a Registry over db (the migrated yidu schema; the DSN must set
// parseTime=true and loc=UTC), ids and store.
func New(db *sql.DB, ids Directory, store Store, opts Options) (*Registry, error) {
	opt.Logger(&opts.Logger)
	opt.Clock(&opts.Now)
	if opts.Retry.Attempts <= 0 {
		opts.Retry = DefaultRetry
	}
	if opts.DuplicateCheck <= 0 || opts.DuplicateCheck > MaxDuplicateCheck {
		opts.DuplicateCheck = MaxDuplicateCheck
	}
	if opts.Sleep == nil {
		opts.Sleep = jitter.Sleep
	}
	apps := map[string]yidu.App{}
	for _, a := range opts.Apps {
		apps[a.Name] = a
	}
	met, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	return &Registry{
		apps:    apps,
		db:      db,
		ids:     ids,
		store:   store,
		sender:  opts.Sender,
		orphans: opts.OrphanApplier,
		ledger:  opts.Ledger,
		log:     opts.Logger.With("component", "tracker"),
		met:     met,
		now:     opts.Now,
		retry:   opts.Retry,
		links:   opts.Links,
		dup:     opts.DuplicateCheck,
		sleep:   opts.Sleep,
		notices: map[string][]time.Time{},
	}, nil
}

type metrics struct {
	registrations    *prometheus.CounterVec
	insertStatements prometheus.Counter
	insertedRows     prometheus.Counter
	registerSeconds  prometheus.Histogram
	sendBatches      *prometheus.CounterVec
	resends          prometheus.Counter
	invalidUsers     prometheus.Counter
	badUserIDs       prometheus.Counter
	recallBatches    *prometheus.CounterVec
	orphanErrors     prometheus.Counter
}

// Register outcomes and send statuses, pre-set to 0.
var (
	registerResults = []string{"created", "existing", "resumed", "conflict", "invalid", "error"}
	sendKinds       = []string{kindSend, kindRemind}
	sendStatuses    = []string{statusSent, statusRefused, statusUnsent, statusUnknown}
	recallResults   = []string{"recalled", "refused", "failed"}
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	f := metric.New(reg)
	m := &metrics{
		registrations:    f.CounterVec("yidu_tracker_registrations_total", "Register calls by result.", "result"),
		insertStatements: f.Counter("yidu_tracker_recipient_insert_statements_total", "Multi-row INSERT IGNORE statements into message_read_record."),
		insertedRows:     f.Counter("yidu_tracker_recipient_rows_total", "Recipient rows written (new rows only)."),
		registerSeconds: f.Histogram("yidu_tracker_register_seconds", "Time to register a message (MySQL + Redis, without sending).",
			prometheus.ExponentialBuckets(0.005, 2, 14)),
		sendBatches:  f.CounterVec("yidu_tracker_send_batches_total", "message/send calls by kind (send, remind) and final status.", "kind", "status"),
		resends:      f.Counter("yidu_tracker_send_resends_total", "Batches sent a second time, under WeCom's duplicate check, after an unknown outcome."),
		invalidUsers: f.Counter("yidu_tracker_send_invalid_users_total", "UserIDs WeCom reported as invaliduser."),
		badUserIDs:   f.Counter("yidu_tracker_send_bad_userids_total", "Members left out of a send or reminder because their UserID breaks WeCom's rule."),
		recallBatches: f.CounterVec("yidu_tracker_recall_batches_total",
			"message/recall calls by result (recalled, refused by WeCom, failed: no answer).", "result"),
		orphanErrors: f.Counter("yidu_tracker_orphan_apply_errors_total", "Failed OrphanApplier calls after a registration."),
	}
	metric.Preset(m.registrations.MetricVec, registerResults)
	metric.Preset(m.sendBatches.MetricVec, sendKinds, sendStatuses)
	metric.Preset(m.recallBatches.MetricVec, recallResults)
	return m, f.Err("tracker")
}
