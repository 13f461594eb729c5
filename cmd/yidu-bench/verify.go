package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

type progressJSON struct {
	Recipients int64 `json:"recipients"`
	Read       int64 `json:"read"`
}

// progress reads the dashboard's progress of msgID, as HR's page does.
func progress(ctx context.Context, c *http.Client, dashAddr, msgID string) (progressJSON, error) {
	var p progressJSON
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+dashAddr+"/api/v1/messages/"+msgID+"/progress", nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := c.Do(req)
	if err != nil {
		return p, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return p, fmt.Errorf("progress: %s", resp.Status)
	}
	return p, json.NewDecoder(resp.Body).Decode(&p)
}

// counter sums a counter's series in g.
func counter(g prometheus.Gatherer, name string) float64 {
	mfs, err := g.Gather()
	if err != nil {
		return 0
	}
	var v float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				v += m.GetCounter().GetValue()
			}
		}
	}
	return v
}

// counters returns the non-zero counter series of names in g, keyed
// name{label="value",...}.
func counters(g prometheus.Gatherer, names ...string) map[string]float64 {
	mfs, err := g.Gather()
	if err != nil {
		return nil
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if !slices.Contains(names, mf.GetName()) {
			continue
		}
		for _, m := range mf.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				// A histogram gives its mean: where a callback's time goes.
				if n := h.GetSampleCount(); n > 0 {
					out[mf.GetName()+"_mean_ms"] = h.GetSampleSum() / float64(n) * 1000
					out[mf.GetName()+"_count"] = float64(n)
				}
				continue
			}
			v := m.GetCounter().GetValue()
			if v == 0 {
				continue
			}
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+strconv.Quote(l.GetValue()))
			}
			k := mf.GetName()
			if len(ls) > 0 {
				k += "{" + strings.Join(ls, ",") + "}"
			}
			out[k] = v
		}
	}
	return out
}

// workload builds the storm on msgID, timed for the progress log.
func (b *bench) workload(msgID string, seed uint64) (*workload, error) {
	start := time.Now()
	w, err := buildWorkload(b.app, msgID, b.cfg.Recipients, b.cfg.Extra, b.sentAt, seed)
	if err != nil {
		return nil, err
	}
	b.report.WorkloadBytes = w.bytes
	b.logf("built %d callbacks (%d retries, %d duplicates, %.1f MB) in %s", len(w.reqs), w.retries, w.duplicates,
		float64(w.bytes)/1e6, time.Since(start).Round(time.Millisecond))
	return w, nil
}

// mysqlReads returns the reads MySQL holds for msgID.
//
// It counts the rows still unread (index mrr_read) and subtracts them from
// R, the rows registered: near the end, when it is polled every 100 ms,
// that range is nearly empty, where counting the read rows scanned all R
// of them each time (~50 ms of mysqld at R = 100k, charged to the arm).
// verify checks afterwards that there are exactly R rows, all read.
func (b *bench) mysqlReads(ctx context.Context, msgID string) (int64, error) {
	var unread int64
	err := b.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM message_read_record WHERE corp_id = ? AND msgid = ? AND is_read = 0",
		b.app.CorpID, msgID).Scan(&unread)
	return int64(b.cfg.Recipients) - unread, err
}

// verify checks MySQL holds exactly R reads of msgID, one per member, each
// with the CreateTime of one of the member's presses and source 1.
func (b *bench) verify(ctx context.Context, msgID string) []string {
	var problems []string
	rows, err := b.db.QueryContext(ctx, `SELECT u.userid, r.is_read, COALESCE(UNIX_TIMESTAMP(r.read_time), 0), r.source
		FROM message_read_record r JOIN users u ON u.corp_id = r.corp_id AND u.uid = r.uid
		WHERE r.corp_id = ? AND r.msgid = ?`, b.app.CorpID, msgID)
	if err != nil {
		return []string{err.Error()}
	}
	defer rows.Close()
	var total, read, badTime, badSource int
	for rows.Next() {
		var id string
		var isRead, source int
		var at float64
		if err := rows.Scan(&id, &isRead, &at, &source); err != nil {
			return []string{err.Error()}
		}
		total++
		if isRead != 1 {
			continue
		}
		read++
		i, ok := userIDs.Index(id)
		first, again := readTimes(b.sentAt, i)
		if !ok || (int64(at) != first && int64(at) != again) {
			badTime++
		}
		if source != 1 {
			badSource++
		}
	}
	if err := rows.Err(); err != nil {
		return []string{err.Error()}
	}
	R := b.cfg.Recipients
	if total != R {
		problems = append(problems, fmt.Sprintf("%d recipient rows; want %d", total, R))
	}
	if read != R {
		problems = append(problems, fmt.Sprintf("MySQL holds %d reads; want exactly %d", read, R))
	}
	if badTime > 0 {
		problems = append(problems, fmt.Sprintf("%d reads with a read_time no press had", badTime))
	}
	if badSource > 0 {
		problems = append(problems, fmt.Sprintf("%d reads with source ≠ 1", badSource))
	}
	return problems
}

// redisMemory returns MEMORY USAGE of the message's keys, the number of
// dedup keys and their estimated memory (a sample of up to 1000 keys).
func (b *bench) redisMemory(ctx context.Context, msgID string) (msgBytes, dedupKeys, dedupBytes int64) {
	sum := func(keys []string) int64 {
		p := b.rdb.Pipeline()
		cmds := make([]*redis.IntCmd, len(keys))
		for i, k := range keys {
			cmds[i] = p.MemoryUsage(ctx, k)
		}
		_, _ = p.Exec(ctx)
		var n int64
		for _, c := range cmds {
			n += c.Val()
		}
		return n
	}
	var keys []string
	iter := b.rdb.Scan(ctx, 0, b.prefix+":m:{"+b.app.CorpID+"/"+msgID+"}:*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	msgBytes = sum(keys)
	keys = keys[:0]
	iter = b.rdb.Scan(ctx, 0, b.prefix+":dd:*", 1000).Iterator()
	for iter.Next(ctx) {
		if len(keys) < 1000 {
			keys = append(keys, iter.Val())
		}
		dedupKeys++
	}
	if len(keys) > 0 {
		dedupBytes = sum(keys) * dedupKeys / int64(len(keys))
	}
	return msgBytes, dedupKeys, dedupBytes
}
