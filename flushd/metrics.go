package flushd

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are flushd's Prometheus series; one set per Flusher or Writer.
type metrics struct {
	batches   prometheus.Counter
	rows      prometheus.Histogram
	latency   prometheus.Histogram
	updated   prometheus.Counter
	retries   prometheus.Counter
	orphans   prometheus.Counter
	malformed prometheus.Counter
	commits   prometheus.Counter
	pending   prometheus.Gauge
	lag       *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		reg = prometheus.NewRegistry() // unregistered: metrics still count
	}
	m := &metrics{
		batches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "yidu_flushd_batches_total",
			Help: "UPDATE statements (batches of at most batch_size uids) executed successfully.",
		}),
		rows: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "yidu_flushd_batch_uids",
			Help:    "Uids per UPDATE statement.",
			Buckets: []float64{1, 10, 100, 500, 1000, 2500, 5000, 10000},
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "yidu_flushd_statement_seconds",
			Help:    "Latency of one batch UPDATE statement.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		updated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "yidu_flushd_rows_updated_total",
			Help: "message_read_record rows flipped to read (replays flip none).",
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "yidu_flushd_retries_total",
			Help: "Failed flush attempts that will be retried after a backoff.",
		}),
		orphans: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "yidu_flushd_orphans_total",
			Help: "Reads parked in read_orphans because their recipient row did not exist.",
		}),
		malformed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "yidu_flushd_malformed_total",
			Help: "Delta records skipped because they can never be stored.",
		}),
		commits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "yidu_flushd_commits_total",
			Help: "Successful Kafka offset commits.",
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "yidu_flushd_pending_uids",
			Help: "Reads consumed but not yet written to MySQL.",
		}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "yidu_flushd_consumer_lag",
			Help: "Records between the partition's high watermark and the next record to consume.",
		}, []string{"partition"}),
	}
	reg.MustRegister(m.batches, m.rows, m.latency, m.updated, m.retries, m.orphans,
		m.malformed, m.commits, m.pending, m.lag)
	return m
}
