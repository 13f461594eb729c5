package faulttest

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"

	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/kafkatest"
	"github.com/yidu-io/yidu/internal/rig"
	"github.com/yidu-io/yidu/internal/testenv"
)

const (
	apiToken = "faulttest-api-token-0123456789"
	topic    = "yidu.reads"
	group    = "yidu-flushd-faulttest"
)

// app is the WeCom app the tests play (the official test vector, so a
// captured callback reads like WeCom's); userIDs names its members
// user-0000, user-0001, ...
var (
	app     = rig.App()
	userIDs = rig.UserIDs{Prefix: "user-", Digits: 4}
)

// envOptions shape one scenario's deployment.
type envOptions struct {
	// Notices of Members each are registered (messages).
	Notices, Members int
	// Receivers is how many receivers WeCom spreads its tries over
	// (default 1).
	Receivers int
	// Flushd names the flushd started, in order, each a member of the
	// group before the next starts (default one, "flushd").
	Flushd []string
	// MySQLProxy puts a TCP proxy the scenario can cut (env.proxy) between
	// flushd and MySQL.
	MySQLProxy bool
	// Serve runs one `yidu serve` (every role, the default config: no
	// spool_dir, the data directory in its own $HOME) instead of
	// receivers and flushd (restart_test.go).
	Serve bool
	// Partitions of the deltas topic (default 4).
	Partitions int32
	// BatchSize is flushd's uids per UPDATE (default 100: small, so one
	// flush is many statements and a kill lands between two of them).
	BatchSize int
	// ApacheKafka runs the scenario on a three-node Apache Kafka cluster
	// of its own (kafkatest: replication 3, min.insync.replicas 2, no
	// topic auto-creation; the deltas topic made by `yidu kafka topic`)
	// instead of kfake; e.ak is the cluster.
	ApacheKafka bool
	// Config, when set, edits the configuration file's map before it is
	// written (page_test.go: the fake WeCom, the app's secret, the
	// reading page's public_url).
	Config func(cfg map[string]any)
}

// env is one scenario's deployment: a fresh database, a Redis prefix, a
// kfake cluster that outlives the yidu processes, the configuration file
// every process reads, the notices registered, the processes started, and
// WeCom pointed at the receivers with the reads it is to deliver.
type env struct {
	t       *testing.T
	started time.Time
	dsn     string
	db      *sql.DB
	rdb     *redis.Client
	prefix  string
	store   *bitmap.Store
	kafka   *kafkaCluster      // kfake, unless ApacheKafka
	ak      *kafkatest.Cluster // ApacheKafka
	brokers []string
	cfgPath string
	// liveBound is how long after the last answer the dashboard, Redis
	// and MySQL may take to agree (default liveBound).
	liveBound time.Duration

	msgs      []message
	reads     []readEvent // one per (notice, member), shuffled
	receivers []*proc
	flushd    []*proc
	proxy     *proxy // flushd's way to MySQL with MySQLProxy
	wecom     *wecom

	mu    sync.Mutex
	procs []*proc
	// dataDirs is each receiver address's YIDU_DATA_DIR: the receiver
	// restarted on an address finds its predecessor's spool there, as on
	// a pod's volume (spool on by default: docs/configuration.md).
	dataDirs map[string]string
	// serveHome is `yidu serve`'s $HOME (envOptions.Serve), serveDash its
	// dashboard.
	serveHome string
	serveDash *proc
	kcl       *kgo.Client // admin, see group_test.go
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	return newEnvWith(t, o, nil)
}

// newEnvWith is newEnv with receiver settings added to the configuration.
func newEnvWith(t *testing.T, o envOptions, receiver map[string]any) *env {
	t.Helper()
	o.setDefaults()
	e := &env{t: t, started: time.Now()}
	e.dsn = testenv.MySQLDSN(t)
	e.rdb, e.prefix = testenv.Redis(t)
	e.start(o, testenv.RedisAddr(t), e.dsn, receiver)
	return e
}

// setDefaults fills in the documented defaults of the fields left zero.
func (o *envOptions) setDefaults() {
	if o.Receivers == 0 {
		o.Receivers = 1
	}
	if len(o.Flushd) == 0 {
		o.Flushd = []string{"flushd"}
	}
	if o.Partitions == 0 {
		o.Partitions = 4
	}
	if o.BatchSize == 0 {
		o.BatchSize = 100
	}
}

// start opens the test's own handles on e.dsn and e.rdb, starts the kfake
// cluster, writes the configuration every yidu process reads (Redis at
// redisAddr, MySQL at yiduDSN, receiver settings added to the defaults)
// and deploys o.
func (e *env) start(o envOptions, redisAddr, yiduDSN string, receiver map[string]any) {
	t := e.t
	t.Helper()
	e.db = openUTC(t, e.dsn)
	store, err := bitmap.New(e.rdb, bitmap.Options{Prefix: e.prefix, Logger: slog.New(slog.DiscardHandler)})
	testenv.Check(t, "bitmap.New", err)
	e.store = store
	t.Cleanup(e.store.Close)
	if o.ApacheKafka {
		e.ak = kafkatest.ForTest(t)
		e.brokers = e.ak.Brokers()
	} else {
		e.kafka = startKafka(t, o.Partitions)
		e.brokers = []string{e.kafka.addr()}
	}

	// Every server binds a free port and logs it (rig.Proc.Addr); a
	// restarted receiver gets its predecessor's via YIDU_RECEIVER_LISTEN.
	// Each member reads each message once (plus WeCom's retries): the
	// per-member token bucket must never be what drops a read here.
	rcv := map[string]any{"listen": "127.0.0.1:0", "member_rate": 10_000, "member_burst": 10_000}
	maps.Copy(rcv, receiver)
	// The configuration file, as an operator writes one: what differs from
	// the binary's defaults (docs/configuration.md). yidu itself validates
	// it when each process starts.
	cfg := map[string]any{
		"receiver": rcv,
		"dashboard": map[string]any{"listen": "127.0.0.1:0",
			"tokens": []map[string]any{{"name": "faulttest", "token": apiToken, "corps": []string{app.CorpID}}}},
		"redis": map[string]any{"addr": redisAddr, "prefix": e.prefix},
		"mysql": map[string]any{"dsn": yiduDSN},
		"kafka": map[string]any{"brokers": e.brokers, "topic": topic, "group": group, "partitions": o.Partitions},
		// Several flushd per scenario, tests in parallel.
		"flushd": map[string]any{"listen": "127.0.0.1:0", "interval": "300ms", "batch_size": o.BatchSize, "drain_timeout": "5s"},
		"wecom":  map[string]any{"api_base": "http://127.0.0.1:1"}, // nothing is sent; never reach WeCom
		"apps": []map[string]any{{"name": app.Name, "corp_id": app.CorpID, "agent_id": app.AgentID, "token": app.Token,
			"encoding_aes_key": app.EncodingAESKey, "read_button_key": app.ReadButtonKey}},
	}
	if o.Config != nil {
		o.Config(cfg)
	}
	b, err := yaml.Marshal(cfg)
	testenv.Check(t, "config", err)
	e.cfgPath = filepath.Join(t.TempDir(), "yidu.yaml")
	if err := os.WriteFile(e.cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if o.ApacheKafka {
		// As an operator prepares a Kafka that auto-creates nothing: the
		// topic with the defaults, 3 copies, 2 in sync.
		out, err := exec.Command(yiduBin, "kafka", "topic", "--config", e.cfgPath).CombinedOutput()
		if err != nil {
			t.Fatalf("yidu kafka topic: %v\n%s", err, out)
		}
		t.Logf("yidu kafka topic: %s", strings.TrimSpace(string(out)))
	}
	// Registered after testenv's cleanups, so it runs before them: the
	// processes die before their database is dropped.
	t.Cleanup(e.stopAll)
	e.deploy(o)
}

// deploy registers the notices and starts the receivers and flushd.
func (e *env) deploy(o envOptions) {
	e.t.Helper()
	e.msgs = messages(o.Notices, o.Members)
	e.register(e.msgs)
	if o.Serve {
		e.serveHome = e.t.TempDir()
		rcv, dash := e.startServe("serve", "", "")
		e.receivers = append(e.receivers, rcv)
		e.serveDash = dash
		e.wecom = newWeCom(e.t, rcv.addr)
		e.reads = readsOf(e.msgs)
		return
	}
	var addrs []string
	for i := range o.Receivers {
		name := "receiver"
		if o.Receivers > 1 {
			name += "-" + string(rune('a'+i))
		}
		p := e.startReceiver(name, "")
		e.receivers = append(e.receivers, p)
		addrs = append(addrs, p.addr)
	}
	dsn := ""
	if o.MySQLProxy {
		c, err := mysql.ParseDSN(e.dsn)
		if err != nil {
			e.t.Fatal(err)
		}
		e.proxy = newProxy(e.t, c.Addr)
		c.Addr = e.proxy.addr
		dsn = c.FormatDSN()
	}
	for _, name := range o.Flushd {
		e.flushd = append(e.flushd, e.startMember(name, dsn))
	}
	e.wecom = newWeCom(e.t, addrs...)
	e.reads = readsOf(e.msgs)
}

// openUTC opens dsn with the session in UTC, as yidu's own pool is, so
// UNIX_TIMESTAMP(read_time) is the stored instant.
func openUTC(tb testing.TB, dsn string) *sql.DB {
	tb.Helper()
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	if c.Params == nil {
		c.Params = map[string]string{}
	}
	c.Params["time_zone"] = "'+00:00'"
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// kafkaCluster is kfake in the test process, with its log on disk, so it
// can be stopped and started again as the same broker on the same port
// with the same records and committed offsets. The port is held by the
// test for its whole life (heldListener) and handed to each start: a
// restart never closes and re-binds it, so no parallel package can take
// it meanwhile.
type kafkaCluster struct {
	dir   string
	parts int32
	ln    *heldListener

	mu sync.Mutex
	c  *kfake.Cluster
}

func startKafka(tb testing.TB, partitions int32) *kafkaCluster {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listen for kfake: %v", err)
	}
	k := &kafkaCluster{dir: tb.TempDir(), parts: partitions, ln: holdListener(ln)}
	tb.Cleanup(k.ln.close)
	k.start(tb)
	tb.Cleanup(k.stop)
	return k
}

func (k *kafkaCluster) addr() string { return k.ln.ln.Addr().String() }

// start starts the broker on the held port.
func (k *kafkaCluster) start(tb testing.TB) {
	tb.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	listen := func(string, string) (net.Listener, error) { return k.ln.attach(), nil }
	var err error
	k.c, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.ListenFn(listen), kfake.DataDir(k.dir), kfake.SeedTopics(k.parts, topic))
	if err != nil {
		tb.Fatalf("kfake on %s: %v", k.addr(), err)
	}
}

// freeze stops the broker with its port answering nothing: a client's
// new connections hang, as a broker stopped with SIGSTOP leaves them.
func (k *kafkaCluster) freeze() {
	k.ln.freeze()
	k.stop()
}

// thaw starts the frozen broker again.
func (k *kafkaCluster) thaw(tb testing.TB) {
	k.ln.thaw()
	k.start(tb)
}

func (k *kafkaCluster) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.c != nil {
		k.c.Close()
		k.c = nil
	}
}

// heldListener keeps one TCP port for the whole test and hands its
// connections to the listener attached last (a kfake cluster's). Closing
// an attached listener, as kfake's Close does, only detaches it; while
// none is attached, connections are closed at once, as a stopped broker's
// clients see them fail.
type heldListener struct {
	ln   net.Listener
	mu   sync.Mutex
	cur  *attachedListener
	done chan struct{}
	// frozen: connections are held open, unanswered (a broker stopped
	// with SIGSTOP), until thaw closes them.
	frozen bool
	held   []net.Conn
}

func holdListener(ln net.Listener) *heldListener {
	h := &heldListener{ln: ln, done: make(chan struct{})}
	go h.serve()
	return h
}

func (h *heldListener) serve() {
	defer close(h.done)
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return // closed at the end of the test
		}
		h.mu.Lock()
		a := h.cur
		if h.frozen {
			h.held = append(h.held, c)
			h.mu.Unlock()
			continue
		}
		h.mu.Unlock()
		if a == nil {
			c.Close()
			continue
		}
		select {
		case a.conns <- c:
		case <-a.closed:
			c.Close()
		}
	}
}

// attach returns a listener that receives the port's connections from now
// on.
func (h *heldListener) attach() net.Listener {
	a := &attachedListener{h: h, conns: make(chan net.Conn), closed: make(chan struct{})}
	h.mu.Lock()
	h.cur = a
	h.mu.Unlock()
	return a
}

// freeze holds the port's new connections unanswered until thaw.
func (h *heldListener) freeze() {
	h.mu.Lock()
	h.frozen = true
	h.mu.Unlock()
}

// thaw closes the held connections and passes new ones on again.
func (h *heldListener) thaw() {
	h.mu.Lock()
	h.frozen = false
	held := h.held
	h.held = nil
	h.mu.Unlock()
	for _, c := range held {
		c.Close()
	}
}

func (h *heldListener) close() {
	h.thaw()
	h.ln.Close()
	<-h.done
}

type attachedListener struct {
	h      *heldListener
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func (a *attachedListener) Accept() (net.Conn, error) {
	select {
	case c := <-a.conns:
		return c, nil
	case <-a.closed:
		return nil, net.ErrClosed
	}
}

// Close detaches a; the port stays bound.
func (a *attachedListener) Close() error {
	a.once.Do(func() {
		close(a.closed)
		a.h.mu.Lock()
		if a.h.cur == a {
			a.h.cur = nil
		}
		a.h.mu.Unlock()
	})
	return nil
}

func (a *attachedListener) Addr() net.Addr { return a.h.ln.Addr() }

// proc is one yidu process.
type proc struct {
	*rig.Proc
	addr string // where it serves HTTP (receiver, dashboard), if it does
	// member is a flushd's consumer group member id (startMember).
	member string
}

// spec is `yidu <args...> --config <file>` with extra environment
// (YIDU_RECEIVER_LISTEN, YIDU_MYSQL_DSN ...).
func (e *env) spec(name string, extraEnv []string, args ...string) rig.Spec {
	return rig.Spec{Name: name, Path: yiduBin, Args: append(args, "--config", e.cfgPath),
		Env: append(os.Environ(), extraEnv...)}
}

// track adds p to the processes stopAll ends.
func (e *env) track(p *proc) *proc {
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	return p
}

// startServer runs `yidu <role>` (receiver, dashboard), learns its address
// from its log and waits until it answers path with 200. A restart on
// its predecessor's address (in extraEnv) is retried while the port is
// not free (rig.StartReady).
func (e *env) startServer(name, role, path string, extraEnv ...string) *proc {
	e.t.Helper()
	p := &proc{}
	var err error
	p.Proc, err = rig.StartReady(e.spec(name, extraEnv, role), func(rp *rig.Proc) error {
		ctx := context.Background()
		addr, err := rp.Addr(ctx, role, 15*time.Second)
		if err != nil {
			return err
		}
		p.addr = addr
		return rp.WaitHTTP(ctx, "http://"+addr+path, 15*time.Second)
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return e.track(p)
}

// startReceiver runs `yidu receiver` and waits until it answers: on a
// free port for addr "", else on addr, where a killed receiver was and
// WeCom keeps calling.
func (e *env) startReceiver(name, addr string) *proc {
	e.t.Helper()
	return e.startReceiverEnv(name, addr)
}

// startReceiverEnv is startReceiver with extra environment.
func (e *env) startReceiverEnv(name, addr string, extra ...string) *proc {
	e.t.Helper()
	dir := e.dataDir(addr)
	extra = append([]string{"YIDU_DATA_DIR=" + dir}, extra...)
	var p *proc
	if addr == "" {
		p = e.startServer(name, "receiver", "/healthz", extra...)
	} else {
		p = e.startServer(name, "receiver", "/healthz", append(extra, "YIDU_RECEIVER_LISTEN="+addr)...)
	}
	e.mu.Lock()
	e.dataDirs[p.addr] = dir
	e.mu.Unlock()
	return p
}

// dataDir is the data directory of the receiver on addr: its
// predecessor's, else a new one ("" is a new receiver).
func (e *env) dataDir(addr string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.dataDirs == nil {
		e.dataDirs = map[string]string{}
	}
	if d, ok := e.dataDirs[addr]; ok && addr != "" {
		return d
	}
	return e.t.TempDir()
}

// startFlushd runs `yidu flushd`, optionally with another MySQL DSN.
func (e *env) startFlushd(name, dsn string) *proc {
	e.t.Helper()
	var extra []string
	if dsn != "" {
		extra = append(extra, "YIDU_MYSQL_DSN="+dsn)
	}
	p, err := rig.Start(e.spec(name, extra, "flushd"))
	if err != nil {
		e.t.Fatal(err)
	}
	return e.track(&proc{Proc: p})
}

// kill9 kills p with SIGKILL, as the OOM killer or a lost host would:
// no drain, no offset commit, no deferred anything.
func (p *proc) kill9(tb testing.TB) {
	tb.Helper()
	p.Kill()
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proc) stop(tb testing.TB) {
	tb.Helper()
	if err := p.Stop(30 * time.Second); err != nil {
		tb.Error(err)
	}
}

// stopAll kills what is still running and, when the test failed, shows
// the end of every process's log.
func (e *env) stopAll() {
	e.mu.Lock()
	procs := e.procs
	e.mu.Unlock()
	for _, p := range procs {
		if p.Running() {
			p.Kill()
		}
	}
	if e.t.Failed() {
		for _, p := range procs {
			e.t.Logf("--- %s log (tail) ---\n%s", p.Name(), p.Tail(15))
		}
	}
}

// reconcile runs `yidu reconcile --all-active` to completion.
func (e *env) reconcile() string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, yiduBin, "reconcile", "--all-active", "--config", e.cfgPath, "--log-level", "warn")
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.t.Fatalf("yidu reconcile --all-active: %v\n%s", err, out)
	}
	return string(out)
}

// message is one tracked notice and its audience.
type message struct {
	ID     string
	Users  []string
	SentAt time.Time
}

// register starts `yidu dashboard`, registers msgs through POST
// /api/v1/messages as HR's tooling would, and stops it again.
func (e *env) register(msgs []message) {
	e.t.Helper()
	// The directory knows the audience (a directory sync's work).
	ids, err := idmap.New(e.db, idmap.Options{})
	testenv.Check(e.t, "idmap", err)
	for _, m := range msgs {
		_, err := ids.Assign(context.Background(), app.CorpID, m.Users)
		testenv.Check(e.t, "seed members", err)
	}
	p := e.startServer("dashboard", "dashboard", "/login") // the dashboard has no /healthz
	addr := p.addr
	for _, m := range msgs {
		body, _ := json.Marshal(map[string]any{
			"msgid": m.ID, "app": app.Name, "title": "fault test " + m.ID, "sent_at": m.SentAt,
			"audience": map[string]any{"userids": m.Users},
		})
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/messages", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+apiToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			e.t.Fatalf("register %s: %v", m.ID, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			e.t.Fatalf("register %s = %d %s; want 201", m.ID, resp.StatusCode, b)
		}
	}
	p.stop(e.t)
}

// messages returns n messages with the same audience of users members
// ("user-0000" ...), sent a minute ago.
func messages(n, users int) []message {
	aud := make([]string, users)
	for i := range aud {
		aud[i] = userIDs.ID(i)
	}
	sent := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	ms := make([]message, n)
	for i := range ms {
		ms[i] = message{ID: fmt.Sprintf("notice-%d", i), Users: aud, SentAt: sent}
	}
	return ms
}
