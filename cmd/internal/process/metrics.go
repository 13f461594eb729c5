package process

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/internal/buildinfo"
)

// buildInfoGauge is yidu_build_info: always 1, its labels say what runs.
func buildInfoGauge() prometheus.Collector {
	in := buildinfo.Read()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "yidu_build_info",
		Help: "What this process runs: module version, VCS revision and Go version (always 1).",
		ConstLabels: prometheus.Labels{
			"version": in.Version, "revision": in.Revision, "goversion": in.GoVersion,
		},
	})
	g.Set(1)
	return g
}

// redisPoolCollector exports go-redis's connection pool statistics
// (summed over the nodes of a Cluster) at scrape time.
type redisPoolCollector struct {
	c                                 redis.UniversalClient
	hits, misses, timeouts            *prometheus.Desc
	total, idle, stale, waits, waitNs *prometheus.Desc
}

func newRedisPoolCollector(c redis.UniversalClient) *redisPoolCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &redisPoolCollector{
		c:        c,
		hits:     d("yidu_redis_pool_hits_total", "Connections taken from the Redis pool without dialling."),
		misses:   d("yidu_redis_pool_misses_total", "Connections the Redis pool had to dial."),
		timeouts: d("yidu_redis_pool_timeouts_total", "Waits for a Redis pool connection that timed out (the pool is too small or Redis too slow)."),
		total:    d("yidu_redis_pool_connections", "Open connections in the Redis pool."),
		idle:     d("yidu_redis_pool_idle_connections", "Idle connections in the Redis pool."),
		stale:    d("yidu_redis_pool_stale_connections_total", "Connections the Redis pool closed as stale."),
		waits:    d("yidu_redis_pool_waits_total", "Times a caller waited for a Redis pool connection."),
		waitNs:   d("yidu_redis_pool_wait_seconds_total", "Time callers spent waiting for a Redis pool connection."),
	}
}

func (r *redisPoolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{r.hits, r.misses, r.timeouts, r.total, r.idle, r.stale, r.waits, r.waitNs} {
		ch <- d
	}
}

func (r *redisPoolCollector) Collect(ch chan<- prometheus.Metric) {
	s := r.c.PoolStats()
	if s == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(r.hits, prometheus.CounterValue, float64(s.Hits))
	ch <- prometheus.MustNewConstMetric(r.misses, prometheus.CounterValue, float64(s.Misses))
	ch <- prometheus.MustNewConstMetric(r.timeouts, prometheus.CounterValue, float64(s.Timeouts))
	ch <- prometheus.MustNewConstMetric(r.total, prometheus.GaugeValue, float64(s.TotalConns))
	ch <- prometheus.MustNewConstMetric(r.idle, prometheus.GaugeValue, float64(s.IdleConns))
	ch <- prometheus.MustNewConstMetric(r.stale, prometheus.CounterValue, float64(s.StaleConns))
	ch <- prometheus.MustNewConstMetric(r.waits, prometheus.CounterValue, float64(s.WaitCount))
	ch <- prometheus.MustNewConstMetric(r.waitNs, prometheus.CounterValue, float64(s.WaitDurationNs)/1e9)
}

// redisWhere names the Redis yidu connects to, for errors.
func redisWhere(c config.Redis) string {
	if c.Sentinel.Master != "" {
		return "master " + c.Sentinel.Master + " via sentinels " + strings.Join(c.Sentinel.Addrs, ",")
	}
	return c.Addr
}
