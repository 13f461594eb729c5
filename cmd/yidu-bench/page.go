package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/cmd/internal/process"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/pagereader"
	"github.com/yidu-io/yidu/internal/rig"
)

// armPage is the reading page's storm (issue 39): R members each open
// /r/<app>/<msgid> (signing in through the fake WeCom's OAuth2), reach the
// end and acknowledge, on C concurrent readers; the notice's read_rule is
// acknowledged.
const armPage = "page"

// ratioPageCPU is the report's ratio of the page arm's CPU per reader
// (bench process with yidu in it, Kafka, mysqld, redis) to the ceiling
// arm's per callback.
const ratioPageCPU = "page_cpu_per_reader/ceiling_cpu_per_callback"

// pageSecret is the app's secret in the page arm (the receiver exchanges
// each reader's OAuth2 code with the fake WeCom).
const pageSecret = "yidu-bench-page-secret-0123456789"

// pageSignInTries bounds a reader's opens deferred by the sign-in rate.
const pageSignInTries = 120

// pageFigures are the page arm's own latencies, per step of a reader.
type pageFigures struct {
	// Readers is R; Acked the acks answered 200; Deferred the opens
	// answered 503 by the receiver's sign-in rate and tried again a
	// second later.
	Readers, Acked, Deferred int
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
	users := make([]fakewecom.User, R)
	codes := make(map[string]string, R)
	for i := range R {
		u := userIDs.ID(i)
		users[i] = fakewecom.User{UserID: u, Name: "成员" + u, Departments: []int{1}}
		for k := range pageSignInTries {
			codes[fmt.Sprintf("code-%s-%d", u, k)] = u
		}
	}
	fake := fakewecom.New(fakewecom.Corp{CorpID: b.app.CorpID, Apps: []fakewecom.App{{AgentID: b.app.AgentID, Secret: pageSecret}},
		Users: users, Departments: []fakewecom.Department{{ID: 1, Name: "总公司"}}, Codes: codes})
	fakeAddr, stopFake, err := serve(fake)
	if err != nil {
		return ArmResult{}, err
	}
	defer stopFake()
	base := "http://" + fakeAddr

	cfg := config.Default()
	cfg.MySQL.DSN = b.dsn
	cfg.Redis.Addr = b.cfg.RedisAddr
	cfg.Redis.Prefix = b.prefix
	cfg.Redis.TTL = config.Duration(time.Hour)
	cfg.Kafka.Brokers = b.brokers
	cfg.Kafka.Group = "yidu-bench-" + rig.RandomHex(4)
	cfg.Flushd.Interval = config.Duration(b.cfg.FlushInterval)
	cfg.Receiver.Listen = "127.0.0.1:0"
	cfg.Receiver.Warm = !b.cfg.Cold
	// The page's links and redirect_uri; the readers call the receiver's
	// address itself.
	cfg.Receiver.PublicURL = "http://yidu-bench.invalid"
	cfg.Dashboard.Listen = "127.0.0.1:0"
	cfg.Dashboard.Tokens = []config.Token{{Name: "bench", Token: apiToken, Corps: []string{b.app.CorpID}}}
	cfg.WeCom.APIBase, cfg.WeCom.OAuthBase, cfg.WeCom.LoginBase = base, base, base
	cfg.Apps = []config.App{{Name: b.app.Name, CorpID: b.app.CorpID, AgentID: b.app.AgentID, Token: b.app.Token,
		EncodingAESKey: b.app.EncodingAESKey, ReadButtonKey: b.app.ReadButtonKey, Secret: pageSecret}}
	if err := cfg.Validate(); err != nil {
		return ArmResult{}, err
	}
	m := process.NewMain(cfg, b.cfg.Logger)
	if err := m.Run(ctx, process.All); err != nil {
		m.Close()
		return ArmResult{}, err
	}
	defer func() {
		if err := m.Close(); err != nil {
			b.logf("yidu close: %v", err)
		}
	}()
	start := time.Now()
	if err := b.sendPage(ctx, m.DashboardAddr, msgID); err != nil {
		return ArmResult{}, err
	}
	b.logf("sent %s with its text to %d recipients in %s", msgID, R, time.Since(start).Round(time.Millisecond))

	var pids []int
	if b.kfake != nil {
		pids = append(pids, b.kfake.Pid())
	}
	if b.ak != nil {
		pids = append(pids, b.ak.Pids()...)
	}
	r := ArmResult{Arm: armPage}
	resetPeakRSS()
	cpu0, ext0, my0, rd0 := selfCPU(), sumCPU(pids), sumCPU(b.mysqld), sumCPU(b.redisd)

	// The storm: C readers at a time, each member once.
	b.logf("page: %d readers, %d at a time", R, b.cfg.Conns)
	var (
		mu                     sync.Mutex
		signIn, view, end, ack []time.Duration
		next                   atomic.Int64
		acked, errs, deferred  atomic.Int64
		firstErr               atomic.Value
		wg                     sync.WaitGroup
		lctx, cancel           = context.WithTimeout(ctx, b.cfg.ArmTimeout)
		receiver               = "http://" + m.ReceiverAddr
		storm                  = time.Now()
		lastOK                 atomic.Int64
	)
	for range b.cfg.Conns {
		wg.Go(func() {
			var si, vw, en, ak []time.Duration
			defer func() {
				mu.Lock()
				signIn, view, end, ack = append(signIn, si...), append(view, vw...), append(end, en...), append(ack, ak...)
				mu.Unlock()
			}()
			for {
				i := int(next.Add(1) - 1)
				if i >= R || lctx.Err() != nil {
					return
				}
				u := userIDs.ID(i)
				rd := pagereader.New(receiver, b.app.Name, msgID, 30*time.Second)
				fail := func(err error) {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
				// A reader told 访问人数较多 (503: the receiver's sign-in
				// rate, page.DefaultSignInRate) taps again after the
				// Retry-After second, as a member would.
				var steps pagereader.Steps
				var err error
				for k := 0; k < pageSignInTries; k++ {
					n := 0
					steps, err = rd.OpenTimed(lctx, func() string { n++; return fmt.Sprintf("code-%s-%d", u, k) })
					if pagereader.CodeOf(err) != http.StatusServiceUnavailable || n > 0 || lctx.Err() != nil {
						break
					}
					deferred.Add(1)
					time.Sleep(time.Second)
				}
				if err != nil {
					fail(err)
					continue
				}
				si, vw = append(si, steps.SignIn), append(vw, steps.Page)
				t0 := time.Now()
				if err := rd.Signal(lctx, "read_to_end"); err != nil {
					fail(err)
					continue
				}
				t1 := time.Now()
				en = append(en, t1.Sub(t0))
				if err := rd.Signal(lctx, "acknowledged"); err != nil {
					fail(err)
					continue
				}
				ak = append(ak, time.Since(t1))
				acked.Add(1)
				lastOK.Store(time.Now().UnixNano())
			}
		})
	}
	wg.Wait()
	cancel()
	elapsed := time.Since(storm)
	b.logf("page: %d acks answered 200 in %s, %d errors", acked.Load(), elapsed.Round(time.Millisecond), errs.Load())
	if ctx.Err() != nil {
		return r, ctx.Err()
	}

	// Exact: every ack in Redis's bitmap, page_signals and
	// message_read_record (read_rule acknowledged); CPU counts until then.
	var pf pageFigures
	exactAt := time.Time{}
	deadline := time.Now().Add(b.cfg.FlushInterval + 30*time.Second)
	for time.Now().Before(deadline) {
		if err := b.pageCounts(ctx, m, msgID, &pf); err != nil {
			return r, err
		}
		if pf.InRedis == int64(R) && pf.PageSignals == int64(R) && pf.Read == int64(R) {
			exactAt = time.Now()
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	ext := sumCPU(pids) - ext0
	cpu := selfCPU() - cpu0 + ext
	my, rd := sumCPU(b.mysqld)-my0, sumCPU(b.redisd)-rd0

	pf.Readers, pf.Acked, pf.Deferred = R, int(acked.Load()), int(deferred.Load())
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p := func(ds []time.Duration, q float64) float64 {
		slices.Sort(ds)
		return ms(rig.Percentile(ds, q))
	}
	pf.SignInP99ms = p(signIn, .99)
	pf.PageP50ms, pf.PageP99ms = p(view, .50), p(view, .99)
	pf.EndP99ms = p(end, .99)
	pf.AckP50ms, pf.AckP99ms = p(ack, .50), p(ack, .99)
	r.Requests, r.Accepted, r.Errors, r.Seconds = R, pf.Acked, int(errs.Load()), elapsed.Seconds()
	if v, ok := firstErr.Load().(string); ok {
		r.Status = "first error: " + v
	}
	if r.Seconds > 0 {
		r.PerSecond = float64(pf.Acked) / r.Seconds
	}
	r.P50ms, r.P99ms, r.P999ms = pf.AckP50ms, pf.AckP99ms, p(ack, .999)
	if n := len(ack); n > 0 {
		r.MaxMs = ms(ack[n-1])
	}
	if !exactAt.IsZero() && lastOK.Load() > 0 {
		v := ms(exactAt.Sub(time.Unix(0, lastOK.Load())))
		r.MySQLExactMs = &v
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
	var problems []string
	if pf.Acked != R {
		problems = append(problems, fmt.Sprintf("%d acks answered 200; want %d", pf.Acked, R))
	}
	if pf.InRedis != int64(R) || pf.PageSignals != int64(R) || pf.Read != int64(R) {
		problems = append(problems, fmt.Sprintf("Redis %d, page_signals %d, read %d; want %d each", pf.InRedis, pf.PageSignals, pf.Read, R))
	}
	setExact(&r, problems)
	return r, nil
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
