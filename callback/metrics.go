package callback

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu/internal/metric"
)

// unknownApp labels requests for an app that is not configured; it cannot
// be an app name (yidu.ValidAppName requires [a-z0-9] first), and keeps label values
// bounded whatever path a client sends.
const unknownApp = "_unknown"

// Reasons a verified callback is answered 200 without an effect.
const (
	ignoreMessage     = "message"       // a member's message: not a read signal
	ignoreMenu        = "menu"          // view/click: no read signal yet
	ignoreUnknown     = "unknown_event" // an event the receiver does not handle
	ignoreOtherButton = "other_button"  // a card button other than ReadButtonKey
	ignoreContact     = "contact"       // party/tag change, or no ContactApplier
	ignoreApproval    = "approval"      // an approval card's press, and no Approvals
)

var ignoreReasons = []string{ignoreMessage, ignoreMenu, ignoreUnknown, ignoreOtherButton, ignoreContact, ignoreApproval}

// metrics are the receiver's Prometheus series.
type metrics struct {
	requests    *prometheus.CounterVec
	events      *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	rateLimited *prometheus.CounterVec
	dedupHits   *prometheus.CounterVec
	dedupErrors *prometheus.CounterVec
	ignored     *prometheus.CounterVec
	newReads    *prometheus.CounterVec
	landings    *prometheus.CounterVec
	replies     *prometheus.CounterVec
}

// appMetrics are one app's series, resolved once so that a request does no
// label lookups.
type appMetrics struct {
	outcome          [nOutcomes]prometheus.Counter
	events           [len(kindNames)]prometheus.Counter
	latency          prometheus.Observer
	rateLimited      prometheus.Counter
	dedupHits        prometheus.Counter
	dedupSeenErr     prometheus.Counter
	dedupRememberErr prometheus.Counter
	ignored          map[string]prometheus.Counter
	cardReads        prometheus.Counter
	enterReads       prometheus.Counter
	linkReads        prometheus.Counter
	landings         map[string]prometheus.Counter
	replies          prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	f := metric.New(reg)
	m := &metrics{
		requests: f.CounterVec("yidu_callback_requests_total",
			"WeCom callbacks and tracked link requests answered, by app, outcome and WeCom error code (0: none).",
			"app", "outcome", "code"),
		events: f.CounterVec("yidu_callback_events_total", "Verified, decrypted callbacks by app and event type.", "app", "type"),
		latency: f.HistogramVec("yidu_callback_duration_seconds", "Time to answer a WeCom callback.",
			[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}, "app"),
		rateLimited: f.CounterVec("yidu_callback_rate_limited_total",
			"Read signals answered 200 but not processed: over the member's token bucket.", "app"),
		dedupHits: f.CounterVec("yidu_callback_dedup_hits_total", "Redeliveries skipped because they were already applied.", "app"),
		dedupErrors: f.CounterVec("yidu_callback_dedup_errors_total",
			"Deduper failures (the callback is processed anyway), by operation.", "app", "op"),
		ignored:  f.CounterVec("yidu_callback_ignored_total", "Verified callbacks answered 200 without an effect, by reason.", "app", "reason"),
		newReads: f.CounterVec("yidu_callback_new_reads_total", "New reads reported by the ReadRecorder, by signal.", "app", "signal"),
		landings: f.CounterVec("yidu_callback_link_landings_total",
			"Tracked link visits back from WeCom OAuth2 (all redirected to the target), by result.", "app", "result"),
		replies: f.CounterVec("yidu_callback_passive_replies_total",
			"Card presses answered with a passive reply that updates the member's button.", "app"),
	}
	return m, f.Err("callback")
}

// forApp resolves (and so sets to 0) every series of app.
func (m *metrics) forApp(app string) *appMetrics {
	am := &appMetrics{
		latency:          m.latency.WithLabelValues(app),
		rateLimited:      m.rateLimited.WithLabelValues(app),
		dedupHits:        m.dedupHits.WithLabelValues(app),
		dedupSeenErr:     m.dedupErrors.WithLabelValues(app, "seen"),
		dedupRememberErr: m.dedupErrors.WithLabelValues(app, "remember"),
		ignored:          make(map[string]prometheus.Counter, len(ignoreReasons)),
		cardReads:        m.newReads.WithLabelValues(app, KindTemplateCard.String()),
		enterReads:       m.newReads.WithLabelValues(app, KindEnterAgent.String()),
		linkReads:        m.newReads.WithLabelValues(app, "link"),
		landings:         make(map[string]prometheus.Counter, len(landResults)),
		replies:          m.replies.WithLabelValues(app),
	}
	for _, r := range landResults {
		am.landings[r] = m.landings.WithLabelValues(app, r)
	}
	for o := range nOutcomes {
		am.outcome[o] = m.requests.WithLabelValues(app, outcomes[o].label, strconv.Itoa(outcomes[o].code))
	}
	for k := range am.events {
		am.events[k] = m.events.WithLabelValues(app, Kind(k).String())
	}
	for _, r := range ignoreReasons {
		am.ignored[r] = m.ignored.WithLabelValues(app, r)
	}
	return am
}
