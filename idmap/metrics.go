package idmap

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/yidu-io/yidu/internal/metric"
)

// Operation labels of yidu_idmap_db_queries_total.
const (
	opLookup = iota
	opAssign
	opContact
	opRead
	opSync
	opCount
)

var opNames = [opCount]string{"lookup", "assign", "contact", "read", "sync"}

type metrics struct {
	queries       [opCount]prometheus.Counter
	lookupHit     prometheus.Counter
	lookupMiss    prometheus.Counter
	lookupUnknown prometheus.Counter
	lookupInvalid prometheus.Counter
	assigned      prometheus.Counter
	assignSeconds prometheus.Histogram
	cacheEntries  prometheus.Gauge
	contact       *prometheus.CounterVec
	// roster: the sign-ins' Member answers, from the roster or MySQL.
	roster        [2]prometheus.Counter
	rosterEntries prometheus.Gauge
}

// Indexes of metrics.roster.
const (
	rosterHit = iota
	rosterRead
)

func (m *metrics) query(op int) { m.queries[op].Inc() }

// contactResults are the label values of yidu_idmap_contact_changes_total.
var contactResults = []string{"created", "updated", "renamed", "rename_conflict", "deleted", "ignored"}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	f := metric.New(reg)
	queries := f.CounterVec("yidu_idmap_db_queries_total", "Statements sent to MySQL, by operation (cache hits send none).", "op")
	lookups := f.CounterVec("yidu_idmap_lookups_total", "Lookups by result: hit (cache), miss (found in MySQL), unknown, invalid.", "result")
	mt := &metrics{
		lookupHit:     lookups.WithLabelValues("hit"),
		lookupMiss:    lookups.WithLabelValues("miss"),
		lookupUnknown: lookups.WithLabelValues("unknown"),
		lookupInvalid: lookups.WithLabelValues("invalid"),
		assigned:      f.Counter("yidu_idmap_assigned_total", "New uids created."),
		assignSeconds: f.Histogram("yidu_idmap_assign_seconds", "Duration of one uid assignment transaction (≤1000 ids).",
			prometheus.ExponentialBuckets(0.0005, 2, 14)),
		cacheEntries:  f.Gauge("yidu_idmap_cache_entries", "UserIDs held in the in-memory cache, all corps."),
		contact:       f.CounterVec("yidu_idmap_contact_changes_total", "change_contact callbacks applied, by result.", "result"),
		rosterEntries: f.Gauge("yidu_idmap_roster_entries", "Active members in the last roster read (the reading page's sign-ins)."),
	}
	members := f.CounterVec("yidu_idmap_members_total", "Members looked up at a sign-in, by answer: roster (memory) or mysql.", "from")
	mt.roster[rosterHit], mt.roster[rosterRead] = members.WithLabelValues("roster"), members.WithLabelValues("mysql")
	for i, name := range opNames {
		mt.queries[i] = queries.WithLabelValues(name)
	}
	metric.Preset(mt.contact.MetricVec, contactResults)
	return mt, f.Err("idmap")
}
