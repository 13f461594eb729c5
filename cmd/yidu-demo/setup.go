package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/mod/sumdb/note"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/cmd/internal/process"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/embedded"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/wecomsim"
	"github.com/yidu-io/yidu/migrations"
	"github.com/yidu-io/yidu/wecom"
)

// The demo's WeCom app and corp. Its secrets are random per run.
const (
	demoApp   = "hr"
	demoCorp  = "wwyidudemo000001"
	demoAgent = 1000002
	demoUser  = "demo"
	demoTitle = "新考勤制度 / New attendance policy"
	// demoBody is the notice's text, shown on the card (sub_title_text,
	// within WeCom's length limit: docs/api.md).
	demoBody = "自12月1日起实行弹性打卡，请阅读制度全文后点击“已读”确认。From 1 Dec, flexible clock-in applies: read the policy, then press Read."
)

// setUp starts the servers, yidu and the fake WeCom, seeds the company and
// registers the notice.
func (m *Main) setUp(ctx context.Context) error {
	cfg, err := config.Load("", m.Getenv)
	if err != nil {
		return err
	}
	if m.Getenv("YIDU_RECEIVER_SPOOL_DIR") == "" && m.Getenv("YIDU_DATA_DIR") == "" {
		// A spool of its own, removed at Close: the demo leaves nothing
		// in the user's state directory.
		if m.spoolDir, err = os.MkdirTemp("", "yidu-demo-spool-"); err != nil {
			return fmt.Errorf("demo spool: %w", err)
		}
		cfg.Receiver.SpoolDir = m.spoolDir
	}
	realMySQL, err := m.useBackends(ctx, &cfg)
	if err != nil {
		return err
	}
	cfg.Kafka.Group = "yidu-demo-flushd"
	// Two seconds rather than a minute, so MySQL visibly follows the dashboard.
	cfg.Flushd.Interval = config.Duration(2 * time.Second)

	employees := m.Employees
	if employees == 0 {
		employees = defaultEmployeesEmbedded
		if realMySQL {
			employees = defaultEmployeesReal
		}
	}

	if !realMySQL && employees > 2*defaultEmployeesEmbedded {
		fmt.Fprintf(m.Stdout, "Note: %d employees take minutes to seed on the embedded MySQL; set YIDU_MYSQL_DSN to use a real server.\n", employees)
	}

	secret, token, aesKey := randomHex(16), randomHex(8), randomAESKey()
	company, err := m.fakeCompany(&cfg, secret, employees)
	if err != nil {
		return err
	}
	// The demo's plan counts the readers who only open the app (enterOnly),
	// so its app lists enter_agent among the read signals; by default an
	// app entry is recorded (by_signal) but is not a read.
	cfg.Apps = []config.App{{Name: demoApp, CorpID: demoCorp, AgentID: demoAgent, Token: token, EncodingAESKey: aesKey, Secret: secret,
		ReadSignals: []string{"button", "link", "enter_agent"},
		// A notice to 全员, or to more people than the company has, waits
		// for the approval of m.Approver, who gets the approval card
		// (approval.go); the notice to department 1 (everyone, but not 全员)
		// is not held.
		Approval: &config.Approval{Over: employees, Approvers: []string{m.Approver}}}}

	if err := m.credentials(&cfg); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := process.Check(cfg); err != nil {
		return err
	}

	err = m.step("Migrating MySQL and starting the receiver, flushd and the dashboard", func() error {
		if err := migrate(ctx, cfg.MySQL.DSN); err != nil {
			return err
		}
		m.App = process.NewMain(cfg, m.Logger)
		return m.App.Run(ctx, process.All)
	})
	if err != nil {
		return err
	}
	m.DashboardURL = "http://" + m.App.DashboardAddr + "/"
	m.MsgID = "demo-" + time.Now().UTC().Format("20060102-150405")
	m.secret, m.token, m.aesKey, m.company, m.employees = secret, token, aesKey, company, employees
	return nil
}

// useBackends points cfg at the Redis, MySQL and Kafka named in the
// environment, and at embedded servers (started here) for those it does
// not name. realMySQL: MySQL is a real server.
func (m *Main) useBackends(ctx context.Context, cfg *config.Config) (realMySQL bool, err error) {
	realRedis := m.Getenv("YIDU_REDIS_ADDR") != ""
	realMySQL = m.Getenv("YIDU_MYSQL_DSN") != ""
	realKafka := m.Getenv("YIDU_KAFKA_BROKERS") != ""
	if !realRedis || !realMySQL || !realKafka {
		err := m.step("Starting the embedded servers", func() (err error) {
			m.Servers, err = embedded.Start(ctx, embedded.Options{Logger: m.Logger, KafkaTopic: cfg.Kafka.Topic})
			return err
		})
		if err != nil {
			return false, err
		}
	}
	var backends []string
	if realRedis {
		// A prefix of its own, and keys that do not outlive the demo by a month.
		cfg.Redis.Prefix = "yidu-demo"
		cfg.Redis.TTL = config.Duration(24 * time.Hour)
		backends = append(backends, "Redis "+cfg.Redis.Addr)
	} else {
		cfg.Redis = config.Redis{Addr: m.Servers.RedisAddr, Prefix: "yidu", TTL: cfg.Redis.TTL}
		backends = append(backends, "embedded Redis")
	}
	if realMySQL {
		dsn, err := withDatabase(cfg.MySQL.DSN, m.MySQLDatabase)
		if err != nil {
			return false, err
		}
		if err := process.CreateDatabase(ctx, dsn); err != nil {
			return false, err
		}
		cfg.MySQL.DSN = dsn
		backends = append(backends, "MySQL database "+m.MySQLDatabase)
	} else {
		cfg.MySQL.DSN = m.Servers.MySQLDSN
		// Big batches are slow on go-mysql-server (internal/embedded).
		cfg.Flushd.BatchSize = 500
		backends = append(backends, "embedded MySQL")
	}
	if realKafka {
		backends = append(backends, "Kafka "+strings.Join(cfg.Kafka.Brokers, ","))
	} else {
		cfg.Kafka.Brokers = m.Servers.KafkaBrokers
		backends = append(backends, "embedded Kafka")
	}
	m.Backends = strings.Join(backends, ", ")
	return realMySQL, nil
}

// fakeCompany starts the fake WeCom with a synthetic company of employees
// and points cfg's WeCom and public URLs at it; the dashboard and the
// receiver get their ports here.
func (m *Main) fakeCompany(cfg *config.Config, secret string, employees int) (fakewecom.Corp, error) {
	company := wecomsim.Company(demoCorp, demoAgent, secret, employees, m.Departments)
	// Sign-in with WeCom against the fake (issue 31): the callback is
	// under the dashboard's public URL, so its port is chosen before Run;
	// the fake, like WeCom, refuses a redirect outside the app's trusted
	// domain.
	dashAddr, err := freeOrAny(m.ListenDashboard)
	if err != nil {
		return fakewecom.Corp{}, err
	}
	// The reading page (/r/) signs members in on the receiver, another
	// port of the same host: its public URL too is fixed before Run, and
	// the fake trusts the host on any port.
	recvAddr, err := freeOrAny(m.ListenReceiver)
	if err != nil {
		return fakewecom.Corp{}, err
	}
	host, _, err := net.SplitHostPort(dashAddr)
	if err != nil {
		return fakewecom.Corp{}, fmt.Errorf("dashboard address: %w", err)
	}
	company.Apps[0].RedirectDomain = host
	m.Leader, m.LeaderDept = demoLeader(company)
	m.Approver = company.Users[len(company.Users)-1].UserID
	if err := m.startFakeWeCom(company); err != nil {
		return fakewecom.Corp{}, err
	}
	cfg.WeCom.APIBase = "http://" + m.fakeSrv.Addr
	cfg.WeCom.OAuthBase, cfg.WeCom.LoginBase = cfg.WeCom.APIBase, cfg.WeCom.APIBase
	cfg.Dashboard.PublicURL = "http://" + dashAddr
	cfg.Receiver.PublicURL = "http://" + recvAddr
	cfg.Dashboard.Listen = dashAddr
	cfg.Receiver.Listen = recvAddr
	return company, nil
}

// credentials gives cfg the demo's own evidence log key and its user's
// password and API token (m.LedgerKey, m.Password, m.APIToken).
func (m *Main) credentials(cfg *config.Config) error {
	// The evidence log's key, the demo's own: its verifier key checks the
	// pack (pack.go).
	skey, vkey, err := note.GenerateKey(rand.Reader, "yidu.demo")
	if err != nil {
		return fmt.Errorf("ledger key: %w", err)
	}
	cfg.Ledger.SigningKey, m.LedgerKey = skey, vkey

	m.User, m.Password, m.APIToken = demoUser, randomPassword(), randomHex(20)
	hash, err := bcrypt.GenerateFromPassword([]byte(m.Password), bcrypt.DefaultCost)
	if err != nil {
		return fmt.Errorf("hash password: %w", err)
	}
	cfg.Dashboard.Users = []config.User{{Name: m.User, PasswordHash: string(hash), Corps: []string{"*"}}}
	cfg.Dashboard.Tokens = append(cfg.Dashboard.Tokens, config.Token{Name: "demo", Token: m.APIToken, Corps: []string{"*"}})
	return nil
}

// prepare runs in the background once the dashboard answers: the real
// directory sync, the notice's registration (and its cards), then WeCom's
// player. The dashboard's status line tells what it is doing.
func (m *Main) prepare(ctx context.Context) error {
	employees := m.employees
	// The real directory sync, so names and departments land in MySQL as in
	// production.
	m.setStatus(fmt.Sprintf("演示：正在从模拟企业微信同步通讯录（%d 名员工，%d 个部门）…", employees, m.Departments),
		fmt.Sprintf("Demo: syncing the directory from the fake WeCom (%d employees, %d departments)…", employees, m.Departments))
	err := m.step(fmt.Sprintf("Syncing the directory from the fake WeCom (%d employees, %d departments)", employees, m.Departments), func() error {
		// The app's secret alone, as most deployments: the demo app sees
		// the whole corp, so the read is complete without the
		// contacts-sync secret.
		dir, err := wecom.NewDirectory(wecom.App{CorpID: demoCorp, AgentID: demoAgent, Secret: m.secret}, wecom.DirectoryOptions{})
		if err != nil {
			return err
		}
		sync, err := idmap.NewSyncer(m.App.Mapper, map[string]idmap.Directory{demoCorp: dir},
			idmap.Options{Logger: m.Logger, Registerer: m.App.Registry})
		if err != nil {
			return err
		}
		rep, err := sync.Sync(ctx, demoCorp)
		if err != nil {
			return fmt.Errorf("directory sync: %w", err)
		}
		if rep.Users != employees {
			return fmt.Errorf("directory sync listed %d members; want %d", rep.Users, employees)
		}
		// The receiver has its own pool and idmap (yidu serve): warm it
		// now, or the first press of each member is a lookup that the
		// embedded MySQL, busy with flushd, may not answer within the
		// recorder's 1 s (an ERROR line and a WeCom retry).
		m.App.WarmReceiver(ctx)
		return nil
	})
	if err != nil {
		return err
	}
	what, zh := "Registering the notice to everyone", "正在登记发给全员的通知"
	if m.Send {
		what += " and sending the cards"
		zh += "并发送卡片"
	}
	m.setStatus("演示：通讯录已同步；"+zh+"…", "Demo: directory synced; "+strings.ToLower(what[:1])+what[1:]+"…")
	if err := m.step(what, func() error { return m.register(ctx, employees) }); err != nil {
		return err
	}
	cards, err := m.cards(m.company)
	if err != nil {
		return err
	}
	m.plan = makePlan(m.company.Users, cards, m.Departments, m.Speed, m.Seed)

	m.workers = 16
	if employees > 5000 {
		m.workers = 32
	}
	if m.front, err = startFront(m.App.ReceiverAddr, m.workers, m.Logger); err != nil {
		return err
	}
	pusher, err := wecomsim.NewPusher(wecomsim.Options{
		Target:      "http://" + m.front.addr + "/wecom/callback/" + demoApp,
		App:         wecomsim.App{CorpID: demoCorp, AgentID: demoAgent, Token: m.token, EncodingAESKey: m.aesKey},
		Concurrency: m.workers,
		Logger:      m.Logger,
	})
	if err != nil {
		return err
	}
	m.player = &player{pusher: pusher, front: m.front, log: m.Logger.With("component", "demo.player")}
	return nil
}

// step runs fn, telling the user what happens meanwhile.
// The line is written whole once fn returns, so that steps in the
// background do not break the lines of the progress bar.
func (m *Main) step(what string, fn func() error) error {
	start := time.Now()
	if err := fn(); err != nil {
		fmt.Fprintf(m.Stdout, "%s… failed after %.1fs\n", what, time.Since(start).Seconds())
		return err
	}
	fmt.Fprintf(m.Stdout, "%s… %.1fs\n", what, time.Since(start).Seconds())
	return nil
}

// withDatabase returns dsn naming database name instead of its own.
func withDatabase(dsn, name string) (string, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("YIDU_MYSQL_DSN: %w", err)
	}
	c.DBName = name
	return c.FormatDSN(), nil
}

func migrate(ctx context.Context, dsn string) error {
	db, err := process.OpenDB(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := migrations.Up(ctx, db); err != nil {
		return err
	}
	return nil
}

func (m *Main) startFakeWeCom(c fakewecom.Corp) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("fake wecom: %w", err)
	}
	m.Fake = fakewecom.New(c)
	m.fakeSrv = &http.Server{Addr: ln.Addr().String(), Handler: m.Fake, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := m.fakeSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.Logger.Error("fake wecom stopped", "err", err)
		}
	}()
	return nil
}

// freeOrAny returns addr when it can be listened on now, else a free
// 127.0.0.1 port (another demo or service holds 8081), never port 0: the
// dashboard's public URL, which WeCom's sign-in returns to, needs the
// port before the dashboard starts. The check races with other
// processes; losing the race fails Run with a clear listen error.
func freeOrAny(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		return "", fmt.Errorf("dashboard address: %w", err)
	}
	defer ln.Close()
	a := ln.Addr().(*net.TCPAddr)
	if a.IP.IsUnspecified() { // ":8081": browsers reach it on 127.0.0.1
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(a.Port)), nil
	}
	return a.String(), nil
}

// demoLeader picks the leader to sign in as: the leader of department 2
// (a subtree under the head office), else of the head office itself.
func demoLeader(c fakewecom.Corp) (userID, dept string) {
	for _, want := range []int{2, 1} {
		for _, d := range c.Departments {
			if d.ID == want && len(d.Leaders) > 0 {
				return d.Leaders[0], fmt.Sprintf("%s (%d)", d.Name, d.ID)
			}
		}
	}
	return "", ""
}

// register posts the notice to everyone through the dashboard API, as HR's
// tooling would, and checks that it reached every employee.
func (m *Main) register(ctx context.Context, employees int) error {
	body := map[string]any{
		"msgid": m.MsgID, "app": demoApp, "title": demoTitle, "body": demoBody,
		// Whole seconds: an enter_agent's CreateTime (seconds) in the same
		// second as the send must count as after it.
		"sent_at":  time.Now().UTC().Truncate(time.Second),
		"audience": map[string]any{"departments": []int{1}},
		"send":     m.Send,
	}
	var out struct {
		Recipients int64 `json:"recipients"`
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	code, err := m.api(rctx, http.MethodPost, "/messages", body, &out)
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		// No answer: the dashboard's write timeout (15 s) can cut a long
		// registration off on the embedded MySQL while the tracker goes on
		// and finishes it. A second POST could race the first one's sends,
		// so wait for the first to be done instead.
		m.Logger.Warn("register notice: no answer; waiting for the registration to finish", "err", err)
		return m.awaitRegistration(rctx, employees)
	}
	if err != nil {
		return fmt.Errorf("register notice: %w", err)
	}
	if code != http.StatusCreated {
		return fmt.Errorf("register notice: status %d", code)
	}
	if out.Recipients != int64(employees) {
		return fmt.Errorf("register notice: %d recipients; want %d", out.Recipients, employees)
	}
	return nil
}

// awaitRegistration polls until the notice is registered to every employee
// and, when sending, the fake WeCom has a card for each of them.
func (m *Main) awaitRegistration(ctx context.Context, employees int) error {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		var out struct {
			Recipients int64 `json:"recipients"`
		}
		code, err := m.api(ctx, http.MethodGet, "/messages/"+m.MsgID, nil, &out)
		if err == nil && code == http.StatusOK && out.Recipients == int64(employees) {
			if !m.Send {
				return nil
			}
			if n := len(m.sentCards()); n == employees {
				return nil
			}
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("register notice: not done: %w (last: %v)", ctx.Err(), err)
		}
	}
}

// api calls the dashboard API with the demo's token and decodes a 2xx answer
// into out.
func (m *Main) api(ctx context.Context, method, path string, body, out any) (int, error) {
	return m.apiAs(ctx, m.APIToken, method, path, body, out)
}

// apiAs is api with another token.
func (m *Main) apiAs(ctx context.Context, token, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+m.App.DashboardAddr+"/api/v1"+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// randomAESKey returns an EncodingAESKey: base64 of 32 bytes without its
// trailing "=" (43 characters, shared/wecom-protocol.md).
func randomAESKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return strings.TrimRight(base64.StdEncoding.EncodeToString(b), "=")
}

// randomPassword returns 12 easy-to-type characters (60 bits).
func randomPassword() string {
	const alphabet = "abcdefghijkmnpqrstuvwxyz23456789"
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// sameMsg reports whether a card's task_id belongs to message msgID.
func sameMsg(taskID, msgID string) bool {
	id, ok := yidu.ParseTaskID(taskID)
	return ok && string(id) == msgID
}
