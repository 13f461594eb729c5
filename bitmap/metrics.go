package bitmap

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu/bitmap/delta"
)

// storeMetrics are the Store's Redis metrics.
type storeMetrics struct {
	roundTrip   prometheus.Histogram
	batchCalls  prometheus.Histogram
	queueFull   prometheus.Counter
	redisErrors prometheus.Counter
}

func newStoreMetrics(reg prometheus.Registerer) *storeMetrics {
	if reg == nil {
		reg = prometheus.NewRegistry() // unobserved: the caller asked for none
	}
	m := &storeMetrics{
		roundTrip: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "yidu_bitmap_redis_roundtrip_seconds",
			Help:    "Time of one pipelined Redis round trip of the mark/ack queue.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		batchCalls: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "yidu_bitmap_redis_batch_calls",
			Help:    "Script calls sent in one pipeline by the mark/ack queue.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		}),
		queueFull: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "yidu_bitmap_queue_full_total",
			Help: "Mark/ack requests rejected because the queue was full (answered 503).",
		}),
		redisErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "yidu_bitmap_redis_errors_total",
			Help: "Mark/ack requests that failed in Redis (answered 503).",
		}),
	}
	reg.MustRegister(m.roundTrip, m.batchCalls, m.queueFull, m.redisErrors)
	return m
}

// Outcome label values of yidu_bitmap_reads_total.
const (
	outcomeLabelNew          = "new"
	outcomeLabelDuplicate    = "duplicate"
	outcomeLabelInFlight     = "in_flight"
	outcomeLabelNotRecipient = "not_recipient"
	outcomeLabelUnknownMsgID = "unknown_msgid"
	outcomeLabelUnknownUser  = "unknown_user"
)

// recorderMetrics are the Recorder's read path metrics.
type recorderMetrics struct {
	reads         *prometheus.CounterVec
	publish       prometheus.Histogram
	publishErrors prometheus.Counter
	restores      *prometheus.CounterVec
	ackErrors     prometheus.Counter
}

func newRecorderMetrics(reg prometheus.Registerer) *recorderMetrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &recorderMetrics{
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "yidu_bitmap_reads_total",
			Help: "Read signals per (message, member) by source and outcome.",
		}, []string{"source", "outcome"}),
		publish: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "yidu_bitmap_publish_seconds",
			Help:    "Time until Kafka acknowledged every delta of one signal.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		publishErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "yidu_bitmap_publish_errors_total",
			Help: "Signals whose deltas Kafka did not acknowledge (answered 503).",
		}),
		restores: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "yidu_bitmap_restores_total",
			Help: "Messages missing from Redis looked up in MySQL, by result.",
		}, []string{"result"}),
		ackErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "yidu_bitmap_ack_errors_total",
			Help: "Pending leases not cleared after Kafka's ack (a later signal re-emits).",
		}),
	}
	for _, s := range []delta.Source{delta.SourceCard, delta.SourceEnterAgent, delta.SourceLink} {
		for _, o := range []string{outcomeLabelNew, outcomeLabelDuplicate, outcomeLabelInFlight,
			outcomeLabelNotRecipient, outcomeLabelUnknownMsgID, outcomeLabelUnknownUser} {
			m.reads.WithLabelValues(s.String(), o)
		}
	}
	for _, r := range []string{"restored", "not_found", "error"} {
		m.restores.WithLabelValues(r)
	}
	reg.MustRegister(m.reads, m.publish, m.publishErrors, m.restores, m.ackErrors)
	return m
}
