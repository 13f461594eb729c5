package idmap

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// The Mapper's series, for the external tests to read with
// prometheus/testutil.

// OpNames are the op label values of yidu_idmap_db_queries_total.
var OpNames = opNames[:]

// QueryCounter is m's yidu_idmap_db_queries_total{op}.
func QueryCounter(m *Mapper, op string) prometheus.Counter {
	return m.metrics.queries[slices.Index(opNames[:], op)]
}

// LookupHits is m's yidu_idmap_lookups_total{result="hit"}.
func LookupHits(m *Mapper) prometheus.Counter { return m.metrics.lookupHit }

// CacheEntries is m's yidu_idmap_cache_entries.
func CacheEntries(m *Mapper) prometheus.Gauge { return m.metrics.cacheEntries }
