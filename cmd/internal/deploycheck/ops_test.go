package deploycheck_test

import (
	"database/sql"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	_ "github.com/go-sql-driver/mysql" // the DB stats collector's Describe needs a *sql.DB
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/cmd/internal/process"
)

const (
	monitoringDir = "monitoring"
	grafanaFile   = "monitoring/grafana-dashboard.json"
	rulesFile     = "monitoring/prometheusrule.yaml"
	monitorFile   = "monitoring/servicemonitor.yaml"
	moduleRoot    = ".."
)

// ---- the metric names yidu exports ----

// recorder is a Registerer that records the names of what registers.
type recorder struct {
	mu    sync.Mutex
	names map[string]bool
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *recorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	r.mu.Lock()
	defer r.mu.Unlock()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.names[m[1]] = true
		}
	}
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = r.Register(c)
	}
}

func (r *recorder) Unregister(prometheus.Collector) bool { return true }

// goMetricName is a metric name as yidu's Go source spells it.
var goMetricName = regexp.MustCompile(`"(yidu_[a-z0-9_]+)"`)

// exportedMetrics returns every metric name a yidu process can export:
// the yidu_* literals of the non-test Go source, and the families the
// client libraries build (franz-go's kprom for the producer and the
// consumer, database/sql's pool statistics), taken from the very
// constructors cmd/internal/process uses.
var exportedMetrics = sync.OnceValues(func() (map[string]bool, error) {
	names := map[string]bool{"up": true} // Prometheus's own, per target
	err := filepath.WalkDir(moduleRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != moduleRoot {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range goMetricName.FindAllStringSubmatch(string(b), -1) {
			names[m[1]] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	rec := &recorder{names: names}
	for _, sub := range []string{"producer", "consumer"} {
		opts, err := process.KafkaOpts(config.Default().Kafka, rec, sub)
		if err != nil {
			return nil, err
		}
		// kprom registers its series when the client is built; no broker
		// is dialled before the first request.
		cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers("127.0.0.1:1"))...)
		if err != nil {
			return nil, err
		}
		cl.Close()
	}
	db, err := sql.Open("mysql", "deploycheck@tcp(127.0.0.1:1)/none")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rec.MustRegister(collectors.NewDBStatsCollector(db, "yidu"))
	return names, nil
})

// promName finds the metric names in a PromQL expression: yidu's, the
// database pool's (go_sql_*) and Prometheus's up.
var promName = regexp.MustCompile(`\b(yidu_[a-z0-9_]+|go_sql_[a-z0-9_]+|up)\b`)

// promLabel finds plain label matchers: label="a" or label=~"a|b".
var promLabel = regexp.MustCompile(`\b([a-z_]+)=~?"([a-z_|]+)"`)

// quoted reports whether s appears as a Go string literal in yidu's source.
var goLiterals = sync.OnceValue(func() string {
	var b strings.Builder
	_ = filepath.WalkDir(moduleRoot, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			src, _ := os.ReadFile(p)
			b.Write(src)
		}
		return nil
	})
	return b.String()
})

// checkExpr asserts that every metric expr names is one yidu exports (a
// histogram's _bucket, _sum and _count count as the histogram), and that
// the label values it matches on are values the code sets.
func checkExpr(tb testing.TB, where, expr string) {
	tb.Helper()
	names, err := exportedMetrics()
	if err != nil {
		tb.Fatalf("exported metrics: %v", err)
	}
	found := promName.FindAllString(expr, -1)
	if len(found) == 0 {
		tb.Errorf("%s: %q names no yidu metric", where, expr)
	}
	for _, n := range found {
		base := n
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(n, suf); ok && names[b] {
				base = b
			}
		}
		if !names[base] {
			tb.Errorf("%s: %q uses %s, which yidu does not export", where, expr, n)
		}
	}
	for _, m := range promLabel.FindAllStringSubmatch(expr, -1) {
		if m[1] == "job" {
			continue // the scrape's, not yidu's
		}
		for _, v := range strings.Split(m[2], "|") {
			if !strings.Contains(goLiterals(), strconv.Quote(v)) {
				tb.Errorf("%s: %q matches %s=%q, a value yidu's code never sets", where, expr, m[1], v)
			}
		}
	}
}

func TestExportedMetricsSeen(t *testing.T) {
	names, err := exportedMetrics()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"yidu_callback_requests_total", "yidu_kafka_producer_produce_records_total",
		"yidu_kafka_consumer_fetch_records_total", "go_sql_open_connections", "yidu_redis_pool_timeouts_total", "yidu_build_info", "yidu_ready"} {
		if !names[n] {
			t.Errorf("exportedMetrics lacks %s: the checks below would be blind", n)
		}
	}
}

// ---- Grafana ----

type grafanaPanel struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"`
}

func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile(grafanaFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string         `json:"title"`
		UID    string         `json:"uid"`
		Panels []grafanaPanel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", grafanaFile, err)
	}
	if d.Title == "" || d.UID == "" {
		t.Errorf("dashboard title %q uid %q; want both", d.Title, d.UID)
	}
	var all []grafanaPanel
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			all = append(all, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	exprs := 0
	var text strings.Builder
	for _, p := range all {
		for _, tg := range p.Targets {
			exprs++
			checkExpr(t, grafanaFile+": "+p.Title, tg.Expr)
			text.WriteString(tg.Expr + "\n")
		}
	}
	if exprs == 0 {
		t.Fatal("no queries in the dashboard")
	}
	// The list: each topic has a panel that queries its series.
	for topic, series := range map[string]string{
		"callbacks/s by outcome": "yidu_callback_requests_total",
		"5xx":                    `outcome=~"timeout|downstream|internal"`,
		"p99":                    "histogram_quantile(0.99",
		"consumer lag":           "yidu_flushd_consumer_lag",
		"flush batches":          "yidu_flushd_batches_total",
		"flush rows/s":           "yidu_flushd_rows_updated_total",
		"redis errors":           "yidu_bitmap_redis_errors_total",
		"mysql errors":           "yidu_flushd_retries_total",
		"kafka errors":           "yidu_bitmap_publish_errors_total",
		"reads per message":      "yidu_flushd_batch_uids",
	} {
		if !strings.Contains(text.String(), series) {
			t.Errorf("the dashboard has no panel for %s (%s)", topic, series)
		}
	}
}

// ---- PrometheusRule and ServiceMonitor ----

type monitoringObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
		Selector          map[string]any `yaml:"selector"`
		NamespaceSelector struct {
			MatchNames []string `yaml:"matchNames"`
		} `yaml:"namespaceSelector"`
		Endpoints []struct {
			Port string `yaml:"port"`
			Path string `yaml:"path"`
		} `yaml:"endpoints"`
	} `yaml:"spec"`
}

func loadMonitoring(tb testing.TB, path string) monitoringObject {
	tb.Helper()
	docs := yamlDocs(tb, path, nil)
	if len(docs) != 1 {
		tb.Fatalf("%s: %d documents; want 1", path, len(docs))
	}
	var o monitoringObject
	if err := docs[0].Decode(&o); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	if o.Metadata.Namespace != namespace {
		tb.Errorf("%s: namespace %q; want %q", path, o.Metadata.Namespace, namespace)
	}
	return o
}

func TestPrometheusRule(t *testing.T) {
	o := loadMonitoring(t, rulesFile)
	if o.APIVersion != "monitoring.coreos.com/v1" || o.Kind != "PrometheusRule" {
		t.Fatalf("%s is %s %s; want monitoring.coreos.com/v1 PrometheusRule", rulesFile, o.APIVersion, o.Kind)
	}
	alerts := map[string]string{}
	for _, g := range o.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts[r.Alert] = r.Expr
			checkExpr(t, rulesFile+": "+r.Alert, r.Expr)
			if r.For == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("%s: %s needs for, a severity label and a summary", rulesFile, r.Alert)
			}
		}
	}
	// The alerts, each on the series it is about.
	for alert, series := range map[string]string{
		"YiduConsumerLagGrowing": "yidu_flushd_consumer_lag",
		"YiduPublishErrors":      "yidu_bitmap_publish_errors_total",
		"YiduFlushErrors":        "yidu_flushd_retries_total",
		"YiduNotReady":           "yidu_ready",
		"YiduCallback5xxRatio":   "yidu_callback_requests_total",
		// Issue 46: a loop survives its items, and says so.
		"YiduLoopPanics":         "yidu_loop_panics_total",
		"YiduLoopItemsBackedOff": "yidu_loop_items_backed_off",
	} {
		if !strings.Contains(alerts[alert], series) {
			t.Errorf("%s: alert %s missing or not on %s (expr %q)", rulesFile, alert, series, alerts[alert])
		}
	}
	if !strings.Contains(alerts["YiduConsumerLagGrowing"], "deriv(") {
		t.Errorf("YiduConsumerLagGrowing does not look at the lag's growth")
	}
	// kube-prometheus-stack's docs: the doc page says what to do.
	doc, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	for alert := range alerts {
		if !strings.Contains(string(doc), alert) {
			t.Errorf("docs/deploy.md does not say what to do about %s", alert)
		}
	}
}

func TestServiceMonitor(t *testing.T) {
	o := loadMonitoring(t, monitorFile)
	if o.APIVersion != "monitoring.coreos.com/v1" || o.Kind != "ServiceMonitor" {
		t.Fatalf("%s is %s %s; want monitoring.coreos.com/v1 ServiceMonitor", monitorFile, o.APIVersion, o.Kind)
	}
	if !slices.Contains(o.Spec.NamespaceSelector.MatchNames, namespace) {
		t.Errorf("ServiceMonitor looks in %v; want %s", o.Spec.NamespaceSelector.MatchNames, namespace)
	}
	c := loadCluster(t)
	for _, svc := range c.byKind["Service"] {
		if !labelsMatch(o.Spec.Selector, svc.Metadata.Labels) {
			t.Errorf("ServiceMonitor selector %v does not select Service %s (labels %v)", o.Spec.Selector, svc.Metadata.Name, svc.Metadata.Labels)
			continue
		}
		scraped := false
		for _, p := range svc.Spec.Ports {
			for _, e := range o.Spec.Endpoints {
				scraped = scraped || (e.Port == p.Name && e.Path == "/metrics")
			}
		}
		if !scraped {
			t.Errorf("Service %s: no ServiceMonitor endpoint scrapes /metrics on one of its ports", svc.Metadata.Name)
		}
	}
}

func TestMonitoringKustomization(t *testing.T) {
	docs := yamlDocs(t, filepath.Join(monitoringDir, "kustomization.yaml"), nil)
	var k struct {
		Resources          []string `yaml:"resources"`
		ConfigMapGenerator []struct {
			Name  string   `yaml:"name"`
			Files []string `yaml:"files"`
		} `yaml:"configMapGenerator"`
	}
	if err := docs[0].Decode(&k); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Base(rulesFile), filepath.Base(monitorFile)} {
		if !slices.Contains(k.Resources, f) {
			t.Errorf("monitoring/kustomization.yaml does not list %s", f)
		}
	}
	gen := false
	for _, g := range k.ConfigMapGenerator {
		gen = gen || slices.Contains(g.Files, filepath.Base(grafanaFile))
	}
	if !gen {
		t.Errorf("monitoring/kustomization.yaml does not ship %s as a ConfigMap", grafanaFile)
	}
}

// ---- CronJob, NetworkPolicy ----

func TestDirectorySyncCronJob(t *testing.T) {
	c := loadCluster(t)
	var jobs []*object
	for _, w := range c.workloads() {
		if w.Kind == "CronJob" {
			jobs = append(jobs, w)
		}
	}
	if len(jobs) == 0 {
		t.Fatal("no CronJob runs yidu directory sync")
	}
	cm := c.byKind["ConfigMap"]["yidu-config"]
	var cfg config.Config
	if err := yaml.Unmarshal([]byte(cm.Data["yidu.yaml"]), &cfg); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		ct := j.Spec.Template.Spec.Containers[0]
		where := "CronJob " + j.Metadata.Name
		if len(ct.Args) < 4 || ct.Args[0] != "directory" || ct.Args[1] != "sync" || flagValue(ct.Args, "--app") == "" {
			t.Errorf("%s args %q; want directory sync --app NAME", where, ct.Args)
			continue
		}
		app := flagValue(ct.Args, "--app")
		if _, ok := cfg.App(app); !ok {
			t.Errorf("%s syncs app %q, which config.yaml does not have", where, app)
		}
		if j.Spec.Schedule == "" || j.Spec.ConcurrencyPolicy != "Forbid" {
			t.Errorf("%s: schedule %q, concurrencyPolicy %q; want a schedule and Forbid (never two syncs at once)", where, j.Spec.Schedule, j.Spec.ConcurrencyPolicy)
		}
		refs := map[string]*keyRef{}
		for _, e := range ct.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				refs[e.Name] = e.ValueFrom.SecretKeyRef
			}
		}
		for _, want := range []string{"YIDU_MYSQL_DSN", config.EnvName(app, "secret")} {
			if refs[want] == nil {
				t.Errorf("%s does not get %s", where, want)
			}
		}
		cs := refs[config.EnvName(app, "contacts_secret")]
		if cs == nil || !cs.Optional {
			t.Errorf("%s: %s must come from the Secret, optional (not every app has one)", where, config.EnvName(app, "contacts_secret"))
		}
		for name := range refs {
			if slices.Contains([]string{config.EnvName(app, "token"), config.EnvName(app, "encoding_aes_key"), "YIDU_API_TOKEN", "YIDU_KAFKA_SASL_PASSWORD"}, name) {
				t.Errorf("%s gets %s, which directory sync never uses", where, name)
			}
		}
	}
}

func TestNetworkPolicy(t *testing.T) {
	c := loadCluster(t)
	pols := c.byKind["NetworkPolicy"]
	deny := false
	for _, p := range pols {
		if len(p.Spec.PodSelector) == 0 && slices.Contains(p.Spec.PolicyTypes, "Ingress") && len(p.Spec.Ingress) == 0 {
			deny = true
		}
	}
	if !deny {
		t.Errorf("no default-deny NetworkPolicy (podSelector {}, Ingress, no rules)")
	}
	for _, w := range c.workloads() {
		if runsToCompletion(w.Kind) {
			continue
		}
		ct := w.Spec.Template.Spec.Containers[0]
		for _, port := range ct.Ports {
			allowed := false
			for _, p := range pols {
				if !labelsMatch(p.Spec.PodSelector, w.Spec.Template.Metadata.Labels) {
					continue
				}
				for _, in := range p.Spec.Ingress {
					for _, pp := range in.Ports {
						allowed = allowed || pp.Port == port.ContainerPort || pp.Port == port.Name
					}
				}
			}
			if !allowed {
				t.Errorf("%s %s: no NetworkPolicy lets anything reach port %d: Prometheus (and the Ingress) could not", w.Kind, w.Metadata.Name, port.ContainerPort)
			}
		}
	}
	// flushd serves no one but Prometheus.
	if p := pols["yidu-flushd"]; p != nil {
		for _, in := range p.Spec.Ingress {
			for _, f := range in.From {
				if ml, _ := f.NamespaceSelector["matchLabels"].(map[string]any); ml["kubernetes.io/metadata.name"] != "monitoring" {
					t.Errorf("NetworkPolicy yidu-flushd admits %v; want the monitoring namespace only", f.NamespaceSelector)
				}
			}
		}
	}
}

// ---- Dockerfile stamps ----

// ldflagVar is a -X flag of the go build command.
var ldflagVar = regexp.MustCompile(`-X\s+(github\.com/yidu-io/yidu/internal/buildinfo)\.(\w+)=\$\{?(\w+)\}?`)

func TestDockerfileStamps(t *testing.T) {
	stages := parseDockerfile(t, dockerfile)
	var build, labels, args []string
	for i, st := range stages {
		for _, in := range st {
			switch {
			case in.op == "RUN" && strings.Contains(in.args, "go build"):
				build = append(build, in.args)
			case in.op == "LABEL" && i == len(stages)-1:
				labels = append(labels, in.args)
			case in.op == "ARG":
				args = append(args, strings.SplitN(in.args, "=", 2)[0])
			}
		}
	}
	if len(build) != 1 {
		t.Fatalf("%d go build commands; want 1", len(build))
	}
	src, err := os.ReadFile(filepath.Join(moduleRoot, "internal", "buildinfo", "buildinfo.go"))
	if err != nil {
		t.Fatal(err)
	}
	stamped := map[string]bool{}
	for _, m := range ldflagVar.FindAllStringSubmatch(build[0], -1) {
		if !regexp.MustCompile(`(?m)^\s+` + m[2] + `\s+string`).Match(src) {
			t.Errorf("go build stamps buildinfo.%s, which internal/buildinfo does not declare", m[2])
		}
		if !slices.Contains(args, m[3]) {
			t.Errorf("go build stamps buildinfo.%s from $%s, which is no ARG", m[2], m[3])
		}
		stamped[m[2]] = true
	}
	for _, v := range []string{"version", "revision", "time"} {
		if !stamped[v] {
			t.Errorf("go build does not stamp buildinfo.%s (-ldflags -X)", v)
		}
	}
	all := strings.Join(labels, " ")
	for _, l := range []string{"title", "source", "version", "revision", "created"} {
		if !strings.Contains(all, "org.opencontainers.image."+l+"=") {
			t.Errorf("final stage has no org.opencontainers.image.%s label", l)
		}
	}
}

// ---- example secrets ----

// bcryptHash finds bcrypt hashes in text.
var bcryptHash = regexp.MustCompile(`\$2[aby]\$\d\d\$[./A-Za-z0-9]{53}`)

// TestExampleSecretsRefused: every password hash in deploy/, docs/ and the
// README is one config refuses (config.ExampleSecrets), so no example can
// become a working credential.
func TestExampleSecretsRefused(t *testing.T) {
	var files []string
	for _, root := range []string{".", "../docs"} {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files = append(files, p)
			}
			return nil
		})
	}
	files = append(files, "../README.md")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range bcryptHash.FindAllString(string(b), -1) {
			if !slices.Contains(config.ExampleSecrets, h) {
				t.Errorf("%s shows password hash %s, which config.ExampleSecrets does not refuse", f, h)
			}
		}
	}
}
