package main

import (
	"context"
	"fmt"
	"net/http"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/cmd/internal/process"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/pagereader"
	"github.com/yidu-io/yidu/internal/rig"
	"github.com/yidu-io/yidu/page"
)

// armPage is the reading page's storm (issues 39, 50): R members each open
// /r/<app>/<msgid>, reach the end and acknowledge, on C concurrent
// readers; the notice's read_rule is acknowledged. A share of them
// (-page-signin, default 20 %) has no session and signs in through the
// fake WeCom's OAuth2 first; the others signed in on an earlier day (their
// 30-day sessions are seeded in Redis before the storm). Each reader comes
// from its own address through the ingress (X-Forwarded-For, trusted as
// receiver.trusted_proxies), as phones do.
const armPage = "page"

// ratioPageCPU is the report's ratio of the page arm's CPU per reader
// (bench process with yidu in it, Kafka, mysqld, redis) to the ceiling
// arm's per callback.
const ratioPageCPU = "page_cpu_per_reader/ceiling_cpu_per_callback"

// pageSecret is the app's secret in the page arm (the receiver exchanges
// each reader's OAuth2 code with the fake WeCom).
const pageSecret = "yidu-bench-page-secret-0123456789"

// pageSignInTries bounds a reader's opens deferred by the sign-in bounds.
const pageSignInTries = 20

// signsIn reports whether reader i of the page arm has no session: the
// first share of each hundred.
func signsIn(i int, share float64) bool { return float64(i%100) < share*100 }

// readerAddr is reader i's address (10.0.0.0/8).
func readerAddr(i int) string { return fmt.Sprintf("10.%d.%d.%d", (i>>16)&255, (i>>8)&255, i&255) }

// pageFigures are the page arm's own latencies, per step of a reader.
type pageFigures struct {
	// Readers is R; SignedIn those who signed in (no session); Acked the
	// acks answered 200; Deferred the opens put off by the sign-in
	// bounds (429 请稍候) and tried again after it; Refused answers of
	// 503.
	Readers, SignedIn, Acked, Deferred, Refused int
	// MySQLQueries and MySQLSelects are the server's Questions and
	// Com_select during the storm per reader, less the server's rate in
	// the 2 s before it (a shared MariaDB's other clients); flushd's
	// writes are in them.
	MySQLQueries, MySQLSelects float64
	// SignIn is the OAuth2 round (the redirect to WeCom and the code's
	// exchange); Page the GET of the page once signed in (it records
	// link); Ack the POST of acknowledged.
	SignInP99ms, PageP50ms, PageP99ms, EndP99ms, AckP50ms, AckP99ms float64
	// InRedis, PageSignals, Read: the acknowledgements Redis's bitmap,
	// page_signals (source 6) and message_read_record (is_read) hold.
	InRedis, PageSignals, Read int64
}

// page runs the page arm. Figures are an ArmResult like the others'
// (accepted = acks answered 200, p50/p99 of the ack) plus pageFigures.
func (b *bench) page(ctx context.Context) (ArmResult, error) {
	const msgID = "storm-page"
	R := b.cfg.Recipients
	base, stopFake, err := b.pageFake()
	if err != nil {
		return ArmResult{}, err
	}
	defer stopFake()

	cfg := b.yiduConfig(pageSecret)
	// The page's links and redirect_uri; the readers call the receiver's
	// address itself.
	cfg.Receiver.PublicURL = "http://yidu-bench.invalid"
	cfg.Receiver.TrustedProxies = []string{"127.0.0.1/32"}
	cfg.WeCom.APIBase, cfg.WeCom.OAuthBase, cfg.WeCom.LoginBase = base, base, base
	m, stop, err := b.runYidu(ctx, cfg, false)
	if err != nil {
		return ArmResult{}, err
	}
	defer stop()
	start := time.Now()
	if err := b.sendPage(ctx, m.DashboardAddr, msgID); err != nil {
		return ArmResult{}, err
	}
	b.logf("sent %s with its text to %d recipients in %s", msgID, R, time.Since(start).Round(time.Millisecond))

	sessions, err := b.seedSessions(ctx, m)
	if err != nil {
		return ArmResult{}, err
	}
	pool := &http.Transport{MaxIdleConns: 4 * b.cfg.Conns, MaxIdleConnsPerHost: 4 * b.cfg.Conns, IdleConnTimeout: time.Minute}
	defer pool.CloseIdleConnections()

	pids := b.kafkaPids()
	r := ArmResult{Arm: armPage}
	resetPeakRSS()
	idle := b.mysqlIdle(ctx)
	cpu0, ext0, my0, rd0 := selfCPU(), sumCPU(pids), sumCPU(b.mysqld), sumCPU(b.redisd)

	// The profile covers what the CPU figures cover: the storm until
	// exact, not the attachment phase after it.
	stopProfile := func() {}
	if b.cfg.CPUProfile != "" {
		stop, err := startProfile(b.cfg.CPUProfile)
		if err != nil {
			return r, err
		}
		var once sync.Once
		stopProfile = func() { once.Do(stop) }
		defer stopProfile()
	}
	// The storm: C readers at a time, each member once.
	b.logf("page: %d readers, %d at a time", R, b.cfg.Conns)
	s := &pageStorm{b: b, msgID: msgID, receiver: "http://" + m.ReceiverAddr, pool: pool, sessions: sessions,
		readers: make([]*pagereader.Reader, R)}
	storm := time.Now()
	s.run(ctx)
	elapsed := time.Since(storm)
	q1, sel1, qerr1 := b.mysqlCounters(ctx)
	b.logf("page: %d acks answered 200 in %s, %d errors", s.acked.Load(), elapsed.Round(time.Millisecond), s.errs.Load())
	if ctx.Err() != nil {
		return r, ctx.Err()
	}

	// Exact: every ack in Redis's bitmap, page_signals and
	// message_read_record (read_rule acknowledged); CPU counts until then.
	var pf pageFigures
	exactAt, err := b.pageExact(ctx, m, msgID, &pf)
	if err != nil {
		return r, err
	}
	ext := sumCPU(pids) - ext0
	cpu := selfCPU() - cpu0 + ext
	my, rd := sumCPU(b.mysqld)-my0, sumCPU(b.redisd)-rd0
	stopProfile()

	s.figures(&r, &pf, elapsed, exactAt)
	if idle.err == nil && qerr1 == nil && R > 0 {
		bg := elapsed.Seconds() / 2
		pf.MySQLQueries = max(0, float64(q1-idle.q1)-bg*float64(idle.q1-idle.q0)) / float64(R)
		pf.MySQLSelects = max(0, float64(sel1-idle.sel1)-bg*float64(idle.sel1-idle.sel0)) / float64(R)
	}
	r.PeakRSSMB = float64(memKB("VmHWM")) / 1024
	if pf.Acked > 0 {
		r.CPUPer1000 = cpu.Seconds() * 1000 / float64(pf.Acked)
		r.KafkaCPUPer1000 = ext.Seconds() * 1000 / float64(pf.Acked)
		r.MySQLdCPUPer1000 = my.Seconds() * 1000 / float64(pf.Acked)
		r.RedisCPUPer1000 = rd.Seconds() * 1000 / float64(pf.Acked)
	}
	r.LoadAvg = rig.LoadAvg()
	r.Page = &pf
	setExact(&r, pageProblems(pf, R))
	// The attachment phase, after the readers' figures are taken.
	if r.Attachment, err = b.attachmentPhase(ctx, m, s.readers); err != nil {
		return r, err
	}
	return r, nil
}

// mysqlIdle are the MySQL server's Questions and Com_select 2 s apart
// with the bench idle: the server is shared, and its rate before the
// storm is taken off the storm's. The second reading starts the storm's.
type mysqlIdle struct {
	q0, sel0, q1, sel1 int64
	err                error // of the second reading
}

// mysqlIdle reads the server's idle rate (see the type).
func (b *bench) mysqlIdle(ctx context.Context) mysqlIdle {
	var m mysqlIdle
	m.q0, m.sel0, _ = b.mysqlCounters(ctx)
	time.Sleep(2 * time.Second)
	m.q1, m.sel1, m.err = b.mysqlCounters(ctx)
	return m
}

// pageFake serves the fake WeCom of the page arm: the members, and the
// OAuth2 codes of those who sign in. base is its URL.
func (b *bench) pageFake() (base string, stop func(), err error) {
	R := b.cfg.Recipients
	users := make([]fakewecom.User, R)
	codes := make(map[string]string, int(float64(R)*b.cfg.PageSignIn+1)*pageSignInTries)
	for i := range R {
		u := userIDs.ID(i)
		users[i] = fakewecom.User{UserID: u, Name: "成员" + u, Departments: []int{1}}
		if !signsIn(i, b.cfg.PageSignIn) {
			continue // holds a session: no code (the map is the fake's, in the bench process's heap)
		}
		for k := range pageSignInTries {
			codes[fmt.Sprintf("code-%s-%d", u, k)] = u
		}
	}
	fake := fakewecom.New(fakewecom.Corp{CorpID: b.app.CorpID, Apps: []fakewecom.App{{AgentID: b.app.AgentID, Secret: pageSecret}},
		Users: users, Departments: []fakewecom.Department{{ID: 1, Name: "总公司"}}, Codes: codes})
	fakeAddr, stop, err := serve(fake)
	if err != nil {
		return "", nil, err
	}
	return "http://" + fakeAddr, stop, nil
}

// seedSessions gives the members who signed in on an earlier day their
// session; sessions[i] is reader i's ("": signs in).
func (b *bench) seedSessions(ctx context.Context, m *process.Main) ([]string, error) {
	R := b.cfg.Recipients
	sessions := make([]string, R)
	seeded := time.Now()
	var seedNext atomic.Int64
	var seedErr atomic.Value
	var sw sync.WaitGroup
	for range 16 {
		sw.Go(func() {
			for {
				i := int(seedNext.Add(1) - 1)
				if i >= R || seedErr.Load() != nil {
					return
				}
				if signsIn(i, b.cfg.PageSignIn) {
					continue
				}
				u := userIDs.ID(i)
				uid, ok, err := m.Mapper.Lookup(ctx, b.app.CorpID, u)
				if err == nil && !ok {
					err = fmt.Errorf("member %s not in the directory", u)
				}
				if err == nil {
					sessions[i], err = m.PageSessions.Create(ctx, b.app.CorpID, u, uid, "成员"+u)
				}
				if err != nil {
					seedErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	sw.Wait()
	if err, ok := seedErr.Load().(error); ok {
		return nil, fmt.Errorf("page: seed sessions: %w", err)
	}
	b.logf("page: sessions of %.0f%% of the members seeded in %s", 100*(1-b.cfg.PageSignIn), time.Since(seeded).Round(time.Millisecond))
	return sessions, nil
}

// pageStorm is the page arm's storm: b.cfg.Conns readers at a time, each
// member once, and what they measured.
type pageStorm struct {
	b        *bench
	msgID    string
	receiver string
	pool     http.RoundTripper
	sessions []string

	mu                     sync.Mutex
	signIn, view, end, ack []time.Duration
	next                   atomic.Int64
	acked, errs, deferred  atomic.Int64
	refused                atomic.Int64
	firstErr               atomic.Value
	lastOK                 atomic.Int64
	// readers keeps each signed-in reader for the attachment phase.
	readers []*pagereader.Reader
}

// run runs the storm until every member read or b.cfg.ArmTimeout passed.
func (s *pageStorm) run(ctx context.Context) {
	var wg sync.WaitGroup
	lctx, cancel := context.WithTimeout(ctx, s.b.cfg.ArmTimeout)
	defer cancel()
	for range s.b.cfg.Conns {
		wg.Go(func() {
			pprof.Do(ctx, pprof.Labels("role", "generator"), func(context.Context) {
				var l readerLatencies
				defer func() {
					s.mu.Lock()
					s.signIn, s.view, s.end, s.ack = append(s.signIn, l.signIn...), append(s.view, l.view...), append(s.end, l.end...), append(s.ack, l.ack...)
					s.mu.Unlock()
				}()
				for {
					i := int(s.next.Add(1) - 1)
					if i >= len(s.readers) || lctx.Err() != nil {
						return
					}
					s.read(lctx, i, &l)
				}
			})
		})
	}
	wg.Wait()
}

// readerLatencies are one generator's latencies of each step.
type readerLatencies struct{ signIn, view, end, ack []time.Duration }

// read is reader i's visit: open the page (signing in first without a
// session), reach the end, acknowledge.
func (s *pageStorm) read(lctx context.Context, i int, l *readerLatencies) {
	u := userIDs.ID(i)
	rd := pagereader.New(s.receiver, s.b.app.Name, s.msgID, 30*time.Second)
	// The ingress in front of the receiver names the reader's address.
	rd.UseTransport(s.pool)
	rd.SetHeader("X-Forwarded-For", readerAddr(i))
	if s.sessions[i] != "" {
		rd.SetSession(page.SessionCookie, s.sessions[i])
	}
	fail := func(err error) {
		s.errs.Add(1)
		if pagereader.CodeOf(err) == http.StatusServiceUnavailable {
			s.refused.Add(1)
		}
		s.firstErr.CompareAndSwap(nil, err.Error())
	}
	// A reader told 请稍候 (429: a sign-in bound) comes back
	// after its page's refresh (1 to 4 s), as the page does.
	var steps pagereader.Steps
	var err error
	for k := 0; k < pageSignInTries; k++ {
		n := 0
		steps, err = rd.OpenTimed(lctx, func() string { n++; return fmt.Sprintf("code-%s-%d", u, k) })
		if pagereader.CodeOf(err) != http.StatusTooManyRequests || n > 0 || lctx.Err() != nil {
			break
		}
		s.deferred.Add(1)
		time.Sleep(time.Second)
	}
	if err != nil {
		fail(err)
		return
	}
	if steps.SignIn > 0 {
		l.signIn = append(l.signIn, steps.SignIn)
	}
	l.view = append(l.view, steps.Page)
	s.readers[i] = rd
	t0 := time.Now()
	if err := rd.Signal(lctx, "read_to_end"); err != nil {
		fail(err)
		return
	}
	t1 := time.Now()
	l.end = append(l.end, t1.Sub(t0))
	if err := rd.Signal(lctx, "acknowledged"); err != nil {
		fail(err)
		return
	}
	l.ack = append(l.ack, time.Since(t1))
	s.acked.Add(1)
	s.lastOK.Store(time.Now().UnixNano())
}

// figures sets r's and pf's latencies and counts of the storm, which took
// elapsed; exactAt is when every ack was stored (zero: never).
func (s *pageStorm) figures(r *ArmResult, pf *pageFigures, elapsed time.Duration, exactAt time.Time) {
	R := len(s.readers)
	pf.Readers, pf.Acked, pf.Deferred, pf.Refused = R, int(s.acked.Load()), int(s.deferred.Load()), int(s.refused.Load())
	for i := range R {
		if signsIn(i, s.b.cfg.PageSignIn) {
			pf.SignedIn++
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p := func(ds []time.Duration, q float64) float64 {
		slices.Sort(ds)
		return ms(rig.Percentile(ds, q))
	}
	pf.SignInP99ms = p(s.signIn, .99)
	pf.PageP50ms, pf.PageP99ms = p(s.view, .50), p(s.view, .99)
	pf.EndP99ms = p(s.end, .99)
	pf.AckP50ms, pf.AckP99ms = p(s.ack, .50), p(s.ack, .99)
	r.Requests, r.Accepted, r.Errors, r.Seconds = len(s.readers), pf.Acked, int(s.errs.Load()), elapsed.Seconds()
	if v, ok := s.firstErr.Load().(string); ok {
		r.Status = "first error: " + v
	}
	if r.Seconds > 0 {
		r.PerSecond = float64(pf.Acked) / r.Seconds
	}
	r.P50ms, r.P99ms, r.P999ms = pf.AckP50ms, pf.AckP99ms, p(s.ack, .999)
	if n := len(s.ack); n > 0 {
		r.MaxMs = ms(s.ack[n-1])
	}
	if !exactAt.IsZero() && s.lastOK.Load() > 0 {
		v := ms(exactAt.Sub(time.Unix(0, s.lastOK.Load())))
		r.MySQLExactMs = &v
	}
}

// pageExact waits until Redis, page_signals and message_read_record hold
// every ack, or one flush interval and 30 s passed, and returns when (zero:
// never); pf has the last counts.
func (b *bench) pageExact(ctx context.Context, m *process.Main, msgID string, pf *pageFigures) (time.Time, error) {
	R := int64(b.cfg.Recipients)
	deadline := time.Now().Add(b.cfg.FlushInterval + 30*time.Second)
	for time.Now().Before(deadline) {
		if err := b.pageCounts(ctx, m, msgID, pf); err != nil {
			return time.Time{}, err
		}
		if pf.InRedis == R && pf.PageSignals == R && pf.Read == R {
			return time.Now(), nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Time{}, nil
}

// pageProblems are what keeps the page arm from being exact.
func pageProblems(pf pageFigures, R int) []string {
	var problems []string
	if pf.Acked != R {
		problems = append(problems, fmt.Sprintf("%d acks answered 200; want %d", pf.Acked, R))
	}
	if pf.Refused > 0 {
		problems = append(problems, fmt.Sprintf("%d readers refused (503)", pf.Refused))
	}
	if pf.InRedis != int64(R) || pf.PageSignals != int64(R) || pf.Read != int64(R) {
		problems = append(problems, fmt.Sprintf("Redis %d, page_signals %d, read %d; want %d each", pf.InRedis, pf.PageSignals, pf.Read, R))
	}
	return problems
}

// mysqlCounters returns the MySQL server's Questions and Com_select.
func (b *bench) mysqlCounters(ctx context.Context) (questions, selects int64, err error) {
	rows, err := b.db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Com_select')")
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var v int64
		if err := rows.Scan(&name, &v); err != nil {
			return 0, 0, err
		}
		if name == "Questions" {
			questions = v
		} else {
			selects = v
		}
	}
	return questions, selects, rows.Err()
}

// pageCounts reads the acknowledgements Redis and MySQL hold.
func (b *bench) pageCounts(ctx context.Context, m *process.Main, msgID string, pf *pageFigures) error {
	bm, _, err := m.Store.SignalBitmap(ctx, b.app.CorpID, msgID, yidu.SignalAcknowledged)
	if err != nil {
		return err
	}
	pf.InRedis = 0
	if bm != nil {
		pf.InRedis = int64(bm.GetCardinality())
	}
	if err := b.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM page_signals WHERE corp_id = ? AND msgid = ? AND source = 6 AND version = 1`,
		b.app.CorpID, msgID).Scan(&pf.PageSignals); err != nil {
		return err
	}
	return b.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM message_read_record WHERE corp_id = ? AND msgid = ? AND is_read = 1`,
		b.app.CorpID, msgID).Scan(&pf.Read)
}

// sendPage sends msgID with its text to every member, read_rule
// acknowledged, through the dashboard API (the card goes to the fake WeCom).
func (b *bench) sendPage(ctx context.Context, dashAddr, msgID string) error {
	return b.postMessage(ctx, dashAddr, "send", map[string]any{
		"msgid": msgID, "app": b.app.Name, "title": "2026年度绩效考核办法", "send": true,
		"audience":  map[string]any{"all": true},
		"content":   map[string]any{"markdown": pageText},
		"read_rule": "acknowledged",
	})
}

// pageText is the notice's text: a page of rules and a table, as HR's.
const pageText = "# 2026年度绩效考核办法\n\n第四条 考核周期为一年，自每年1月1日起至12月31日止。各部门负责人应于每季度末完成本部门成员的季度评估。\n\n" +
	"| 等级 | 分数 | 比例 |\n|:--|--:|--:|\n| A 优秀 | 90 以上 | 20% |\n| B 良好 | 75–89 | 50% |\n| C 待改进 | 75 以下 | 30% |\n\n" +
	"第五条 员工对考核结果有异议的，可在结果公布后五个工作日内提出复核申请。\n"
