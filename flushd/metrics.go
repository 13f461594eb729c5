package flushd

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu/internal/metric"
)

// metrics are flushd's Prometheus series; one set per Flusher or Writer.
type metrics struct {
	batches    prometheus.Counter
	rows       prometheus.Histogram
	latency    prometheus.Histogram
	updated    prometheus.Counter
	retries    prometheus.Counter
	orphans    prometheus.Counter
	malformed  prometheus.Counter
	commits    prometheus.Counter
	pending    prometheus.Gauge
	ledgerSlow prometheus.Counter
	lag        *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	f := metric.New(reg)
	m := &metrics{
		batches:    f.Counter("yidu_flushd_batches_total", "UPDATE statements (batches of at most batch_size uids) executed successfully."),
		rows:       f.Histogram("yidu_flushd_batch_uids", "Uids per UPDATE statement.", []float64{1, 10, 100, 500, 1000, 2500, 5000, 10000}),
		latency:    f.Histogram("yidu_flushd_statement_seconds", "Latency of one batch UPDATE statement.", prometheus.ExponentialBuckets(0.001, 2, 14)),
		updated:    f.Counter("yidu_flushd_rows_updated_total", "message_read_record rows flipped to read (replays flip none)."),
		retries:    f.Counter("yidu_flushd_retries_total", "Failed flush attempts that will be retried after a backoff."),
		orphans:    f.Counter("yidu_flushd_orphans_total", "Reads parked in read_orphans because their recipient row did not exist."),
		malformed:  f.Counter("yidu_flushd_malformed_total", "Delta records skipped because they can never be stored."),
		commits:    f.Counter("yidu_flushd_commits_total", "Successful Kafka offset commits."),
		pending:    f.Gauge("yidu_flushd_pending_uids", "Reads consumed but not yet written to MySQL."),
		ledgerSlow: f.Counter("yidu_flushd_ledger_fallbacks_total", "Ledger batches whose reads did not all make their rows read, written again with a locking read of the rows (a replay, a row read before, a read without its row)."),
		lag:        f.GaugeVec("yidu_flushd_consumer_lag", "Records between the partition's high watermark and the next record to consume.", "partition"),
	}
	return m, f.Err("flushd")
}
