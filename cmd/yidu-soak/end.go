package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/yidu-io/yidu/internal/rig"
)

// runLoad drives the schedule while sampling, waits for MySQL to catch
// up, checks every row, stops yidu and fills the report.
func (s *soak) runLoad(ctx context.Context) error {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = s.cfg.Conns
	tr.MaxIdleConnsPerHost = s.cfg.Conns
	rec := &recorder{next: tr}
	s.sched.start = time.Now()
	sp := &sampler{s: s, rec: rec, start: s.sched.start, last: s.sched.start, client: &http.Client{}}
	sctx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		sp.run(sctx, s.cfg.Sample)
	}()
	defer func() {
		stopSampling()
		<-sampled
		s.report.Samples = sp.all()
		s.report.LoadAvgEnd = rig.LoadAvg()
		s.report.evaluate()
	}()

	s.logf("sending %d callbacks at %.0f/s for %s (%d notices × %d recipients, %d in flight at most)",
		s.sched.total, s.cfg.Rate, s.cfg.Duration, len(s.sched.msgs), s.cfg.Recipients, s.cfg.Conns)
	push, err := s.drive(ctx, rec)
	s.report.Push = push
	s.logf("sent: %d callbacks, %d attempts, %d answered 200, %d retries, %d given up, in %s",
		push.Callbacks, push.Attempts, push.OK, push.Retries, push.Failures, push.Elapsed.Round(time.Millisecond))
	if err != nil {
		return err
	}
	sp.take(ctx) // the last window of the load
	sp.setDraining()

	// Drain: every read answered 200 must reach MySQL, within one flush
	// interval and a margin.
	start := time.Now()
	deadline := start.Add(s.cfg.FlushInterval + drainMargin)
	for {
		n, err := s.mysqlReads(ctx)
		if err == nil {
			s.report.MySQLFinal = n
			if n == push.OK {
				s.report.Drained, s.report.DrainAfter = true, time.Since(start)
				break
			}
		}
		if time.Now().After(deadline) {
			s.logf("drain: MySQL holds %d reads, %d were answered 200, after %s", n, push.OK, time.Since(start).Round(time.Second))
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	sp.take(ctx)
	stopSampling()
	<-sampled
	if s.report.Drained {
		s.logf("drained: MySQL holds all %d reads %s after the last callback", push.OK, s.report.DrainAfter.Round(time.Millisecond))
	}

	s.report.DashboardRead, err = s.dashboardReads(ctx)
	if err != nil {
		s.report.DashboardErr = err.Error()
	}
	if err := s.checkRows(ctx); err != nil {
		return err
	}
	stopped := time.Now()
	_ = s.yidu.Stop(stopWait) // killed after stopWait: exit code -1
	s.report.ExitCode, s.report.StopTook = s.yidu.ExitCode(), time.Since(stopped)
	s.logf("SIGTERM: yidu exited with %d after %s", s.report.ExitCode, s.report.StopTook.Round(time.Millisecond))
	return nil
}

// dashboardReads sums the notices' read counts as the dashboard shows
// them (BITCOUNT of the Redis read bitmaps, recipients only).
func (s *soak) dashboardReads(ctx context.Context) (int64, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	var sum int64
	for _, id := range s.sched.msgs {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.dashboard+"/api/v1/messages/"+id+"/progress", nil)
		req.Header.Set("Authorization", "Bearer "+s.apiToken)
		resp, err := c.Do(req)
		if err != nil {
			return sum, fmt.Errorf("dashboard %s: %w", id, err)
		}
		var p struct {
			Read int64 `json:"read"`
		}
		err = json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil {
			return sum, fmt.Errorf("dashboard %s: %s (%v)", id, resp.Status, err)
		}
		sum += p.Read
	}
	return sum, nil
}

// checkRows reads every row with is_read = 1 and checks it against the
// schedule: a read the soak sent, read_time = that callback's CreateTime,
// source 1 (template card button).
func (s *soak) checkRows(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	msgIndex := map[string]int{}
	args := []any{app.CorpID}
	for i, m := range s.sched.msgs {
		msgIndex[m] = i
		args = append(args, m)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT r.msgid, u.userid, COALESCE(UNIX_TIMESTAMP(r.read_time), 0), r.source
		FROM message_read_record r JOIN users u ON u.corp_id = r.corp_id AND u.uid = r.uid
		WHERE r.corp_id = ? AND r.msgid IN (?`+strings.Repeat(", ?", len(s.sched.msgs)-1)+`) AND r.is_read = 1`, args...)
	if err != nil {
		return fmt.Errorf("check rows: %w", err)
	}
	defer rows.Close()
	r := s.report
	for rows.Next() {
		var msg, user string
		var at int64
		var source int
		if err := rows.Scan(&msg, &user, &at, &source); err != nil {
			return fmt.Errorf("check rows: %w", err)
		}
		r.RowsChecked++
		m, okM := msgIndex[msg]
		u, okU := userIDs.Index(user)
		k, sent := 0, false
		if okM && okU && u < s.cfg.Recipients {
			k, sent = s.sched.index(m, u)
		}
		switch {
		case !sent:
			r.Unexpected++
		case at != s.sched.due(k).Unix():
			r.BadReadTime++
		}
		if source != 1 {
			r.BadSource++
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("check rows: %w", err)
	}
	return nil
}
