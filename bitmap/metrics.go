package bitmap

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/internal/metric"
)

// storeMetrics are the Store's Redis metrics.
type storeMetrics struct {
	roundTrip   prometheus.Histogram
	batchCalls  prometheus.Histogram
	batchCmds   prometheus.Histogram
	queueFull   prometheus.Counter
	redisErrors prometheus.Counter
}

func newStoreMetrics(reg prometheus.Registerer) (*storeMetrics, error) {
	f := metric.New(reg)
	m := &storeMetrics{
		roundTrip: f.Histogram("yidu_bitmap_redis_roundtrip_seconds",
			"Time of one pipelined Redis round trip of the mark/ack queue.", prometheus.ExponentialBuckets(0.0001, 2, 16)),
		batchCalls: f.Histogram("yidu_bitmap_redis_batch_calls",
			"Callers' mark/ack/release calls sent in one pipeline by the mark/ack queue.", prometheus.ExponentialBuckets(1, 2, 11)),
		batchCmds: f.Histogram("yidu_bitmap_redis_batch_commands",
			"Redis commands in one pipeline of the mark/ack queue, after merging the calls of one message (one script call, one HDEL).", prometheus.ExponentialBuckets(1, 2, 11)),
		queueFull: f.Counter("yidu_bitmap_queue_full_total",
			"Mark/ack requests rejected because the queue was full (a mark is answered 503; a queued ack is left to expire as its lease)."),
		redisErrors: f.Counter("yidu_bitmap_redis_errors_total", "Mark/ack requests that failed in Redis (answered 503)."),
	}
	return m, f.Err("bitmap")
}

// Outcome label values of yidu_bitmap_reads_total.
const (
	outcomeLabelNew          = "new"
	outcomeLabelUncounted    = "new_uncounted"
	outcomeLabelDuplicate    = "duplicate"
	outcomeLabelInFlight     = "in_flight"
	outcomeLabelNotRecipient = "not_recipient"
	outcomeLabelUnknownMsgID = "unknown_msgid"
	outcomeLabelUnknownUser  = "unknown_user"
)

// recorderMetrics are the Recorder's read path metrics.
type recorderMetrics struct {
	reads *prometheus.CounterVec
	// newReads[src] is reads{source=src, outcome=new}, resolved once: the
	// read path counts one per callback.
	newReads      [delta.SourceAck + 1]prometheus.Counter
	publish       prometheus.Histogram
	publishErrors prometheus.Counter
	restores      *prometheus.CounterVec
	ackErrors     prometheus.Counter
}

func newRecorderMetrics(reg prometheus.Registerer) (*recorderMetrics, error) {
	f := metric.New(reg)
	m := &recorderMetrics{
		reads: f.CounterVec("yidu_bitmap_reads_total",
			"Read signals per (message, member) by source and outcome (new_uncounted: a new signal that does not count as read for the app).",
			"source", "outcome"),
		publish: f.Histogram("yidu_bitmap_publish_seconds", "Time until Kafka acknowledged every delta of one signal.",
			prometheus.ExponentialBuckets(0.0005, 2, 14)),
		publishErrors: f.Counter("yidu_bitmap_publish_errors_total", "Signals whose deltas Kafka did not acknowledge (answered 503)."),
		restores:      f.CounterVec("yidu_bitmap_restores_total", "Messages missing from Redis looked up in MySQL, by result.", "result"),
		ackErrors: f.Counter("yidu_bitmap_ack_errors_total",
			"Pending leases not cleared after Kafka's ack (a later signal re-emits)."),
	}
	metric.Preset(m.reads.MetricVec,
		[]string{delta.SourceCard.String(), delta.SourceEnterAgent.String(), delta.SourceLink.String(), delta.SourceReadToEnd.String(), delta.SourceAck.String()},
		[]string{outcomeLabelNew, outcomeLabelUncounted, outcomeLabelDuplicate, outcomeLabelInFlight, outcomeLabelNotRecipient, outcomeLabelUnknownMsgID, outcomeLabelUnknownUser})
	metric.Preset(m.restores.MetricVec, []string{"restored", "not_found", "error"})
	for _, src := range []delta.Source{delta.SourceCard, delta.SourceEnterAgent, delta.SourceLink, delta.SourceReadToEnd, delta.SourceAck} {
		m.newReads[src] = m.reads.WithLabelValues(src.String(), outcomeLabelNew)
	}
	return m, f.Err("bitmap: recorder")
}
