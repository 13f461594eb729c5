package deploy_test

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/bcrypt"

	"github.com/yidu-io/yidu/config"
)

// The tests run in deploy/; every path is relative to it.
const (
	k8sDir      = "k8s"
	composeFile = "compose.yaml"
	dockerfile  = "Dockerfile"
	configDoc   = "../docs/configuration.md"
	namespace   = "yidu"
)

// roles are the yidu subcommands a container may run, with the config
// listen address whose port it serves ("" for none).
var roles = map[string]string{
	"receiver":  "receiver",
	"dashboard": "dashboard",
	"flushd":    "",
	"migrate":   "",
}

// cmdEnv are the variables cmd/yidu reads itself, outside config.Load.
var cmdEnv = map[string]bool{"YIDU_CONFIG": true}

// ---- YAML files ----

// yamlDocs returns the documents of a (multi-document) YAML file.
func yamlDocs(tb testing.TB, path string, interpolate func(string) string) []*yaml.Node {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	text := string(b)
	if interpolate != nil {
		text = interpolate(text)
	}
	dec := yaml.NewDecoder(strings.NewReader(text))
	var docs []*yaml.Node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			tb.Fatalf("%s: document %d: %v", path, len(docs)+1, err)
		}
		docs = append(docs, &n)
	}
	return docs
}

func yamlFiles(tb testing.TB, root string) []string {
	tb.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ext := filepath.Ext(p); !d.IsDir() && (ext == ".yaml" || ext == ".yml") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return files
}

func TestEveryYAMLParses(t *testing.T) {
	files := yamlFiles(t, ".")
	if len(files) < 5 {
		t.Fatalf("found %d YAML files under deploy/: %v; want the compose stack, configs and k8s manifests", len(files), files)
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			docs := yamlDocs(t, f, nil)
			if len(docs) == 0 {
				t.Fatalf("%s has no YAML document", f)
			}
			for i, d := range docs {
				if len(d.Content) != 1 || d.Content[0].Kind != yaml.MappingNode {
					t.Errorf("%s: document %d is not a mapping", f, i+1)
				}
			}
		})
	}
}

// ---- yidu configuration ----

// loadConfig loads a yidu configuration with the binary's own loader
// (unknown keys fail) and env as the environment, and returns the
// variable names the loader asked for: exactly the ones yidu reads.
func loadConfig(tb testing.TB, path string, env map[string]string) (config.Config, map[string]bool) {
	tb.Helper()
	read := map[string]bool{}
	cfg, err := config.Load(path, func(k string) string {
		read[k] = true
		return env[k]
	})
	if err != nil {
		tb.Fatalf("config.Load(%s) with the manifest's environment: %v", path, err)
	}
	return cfg, read
}

// checkConfig asserts what a deployed configuration needs beyond loading:
// every YIDU_* variable the manifest sets is read by yidu and documented,
// the dashboard's password hashes are bcrypt (dashboard.New refuses
// others), and the listen addresses are reachable from outside the
// container.
func checkConfig(tb testing.TB, where string, cfg config.Config, read map[string]bool, env map[string]string) {
	tb.Helper()
	doc, err := os.ReadFile(configDoc)
	if err != nil {
		tb.Fatal(err)
	}
	for name := range env {
		if !strings.HasPrefix(name, "YIDU_") {
			continue
		}
		if !read[name] && !cmdEnv[name] {
			tb.Errorf("%s sets %s, which yidu never reads (typo, or an app missing from the config?)", where, name)
			continue
		}
		if documented := envDoc(cfg, name); !strings.Contains(string(doc), documented) {
			tb.Errorf("%s sets %s, but docs/configuration.md does not mention %s", where, name, documented)
		}
	}
	for _, u := range cfg.Dashboard.Users {
		if _, err := bcrypt.Cost([]byte(u.PasswordHash)); err != nil {
			tb.Errorf("%s: dashboard user %s: password_hash is not bcrypt: %v", where, u.Name, err)
		}
	}
	for _, l := range []struct{ key, addr string }{
		{"receiver.listen", cfg.Receiver.Listen},
		{"dashboard.listen", cfg.Dashboard.Listen},
	} {
		host, _, err := net.SplitHostPort(l.addr)
		if err != nil {
			tb.Errorf("%s: %s %q: %v", where, l.key, l.addr, err)
			continue
		}
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			tb.Errorf("%s: %s %q is loopback: unreachable from outside the container", where, l.key, l.addr)
		}
	}
}

// envDoc returns how docs/configuration.md names variable name: app
// secrets appear as YIDU_APP_<NAME>_TOKEN and so on.
func envDoc(cfg config.Config, name string) string {
	for _, a := range cfg.Apps {
		for _, f := range []string{"token", "encoding_aes_key", "secret"} {
			if config.EnvName(a.Name, f) == name {
				return "YIDU_APP_<NAME>_" + strings.ToUpper(f)
			}
		}
	}
	return name
}

// listenPort returns the port of the listen address role serves.
func listenPort(tb testing.TB, cfg config.Config, role string) int {
	tb.Helper()
	addr := map[string]string{"receiver": cfg.Receiver.Listen, "dashboard": cfg.Dashboard.Listen}[roles[role]]
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		tb.Fatalf("%s listen %q: %v", role, addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		tb.Fatalf("%s listen %q: port: %v", role, addr, err)
	}
	return n
}

// configArg returns the --config path of a yidu command line.
func configArg(args []string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			return v
		}
		if a == "--config" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// ---- Kubernetes ----

type object struct {
	file       string
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Resources  []string          `yaml:"resources"` // Kustomization
	Spec       struct {
		Replicas *int `yaml:"replicas"`
		// Deployment, PDB: {matchLabels: …}; Service: the labels.
		Selector map[string]any `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
		Ports []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort any    `yaml:"targetPort"`
		} `yaml:"ports"`
		MinAvailable   any `yaml:"minAvailable"`
		ScaleTargetRef struct {
			Kind string `yaml:"kind"`
			Name string `yaml:"name"`
		} `yaml:"scaleTargetRef"`
		MinReplicas int `yaml:"minReplicas"`
		MaxReplicas int `yaml:"maxReplicas"`
		Metrics     []struct {
			Type     string `yaml:"type"`
			Resource struct {
				Name string `yaml:"name"`
			} `yaml:"resource"`
		} `yaml:"metrics"`
	} `yaml:"spec"`
}

type podSpec struct {
	AutomountServiceAccountToken *bool            `yaml:"automountServiceAccountToken"`
	RestartPolicy                string           `yaml:"restartPolicy"`
	SecurityContext              *securityContext `yaml:"securityContext"`
	Containers                   []container      `yaml:"containers"`
	Volumes                      []struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
		Secret *struct {
			SecretName string `yaml:"secretName"`
		} `yaml:"secret"`
	} `yaml:"volumes"`
}

type securityContext struct {
	RunAsNonRoot             *bool  `yaml:"runAsNonRoot"`
	RunAsUser                *int64 `yaml:"runAsUser"`
	AllowPrivilegeEscalation *bool  `yaml:"allowPrivilegeEscalation"`
	ReadOnlyRootFilesystem   *bool  `yaml:"readOnlyRootFilesystem"`
	Capabilities             struct {
		Drop []string `yaml:"drop"`
	} `yaml:"capabilities"`
	SeccompProfile struct {
		Type string `yaml:"type"`
	} `yaml:"seccompProfile"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Ports   []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef    *keyRef `yaml:"secretKeyRef"`
			ConfigMapKeyRef *keyRef `yaml:"configMapKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	EnvFrom []struct {
		SecretRef    *keyRef `yaml:"secretRef"`
		ConfigMapRef *keyRef `yaml:"configMapRef"`
	} `yaml:"envFrom"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
	} `yaml:"volumeMounts"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext *securityContext `yaml:"securityContext"`
}

type keyRef struct {
	Name     string `yaml:"name"`
	Key      string `yaml:"key"`
	Optional bool   `yaml:"optional"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
	TCPSocket *struct {
		Port any `yaml:"port"`
	} `yaml:"tcpSocket"`
}

// cluster is every object of deploy/k8s, by kind and name.
type cluster struct {
	objects []*object
	byKind  map[string]map[string]*object
}

func loadCluster(tb testing.TB) *cluster {
	tb.Helper()
	c := &cluster{byKind: map[string]map[string]*object{}}
	for _, f := range yamlFiles(tb, k8sDir) {
		for i, d := range yamlDocs(tb, f, nil) {
			o := &object{file: f}
			if err := d.Decode(o); err != nil {
				tb.Fatalf("%s: document %d: %v", f, i+1, err)
			}
			if o.APIVersion == "" || o.Kind == "" {
				tb.Fatalf("%s: document %d has no apiVersion or kind", f, i+1)
			}
			if c.byKind[o.Kind] == nil {
				c.byKind[o.Kind] = map[string]*object{}
			}
			if o.Kind != "Kustomization" {
				if o.Metadata.Name == "" {
					tb.Fatalf("%s: %s without metadata.name", f, o.Kind)
				}
				if c.byKind[o.Kind][o.Metadata.Name] != nil {
					tb.Fatalf("%s: %s %s defined twice", f, o.Kind, o.Metadata.Name)
				}
			}
			c.byKind[o.Kind][o.Metadata.Name] = o
			c.objects = append(c.objects, o)
		}
	}
	return c
}

// workloads are the Deployments and Jobs.
func (c *cluster) workloads() []*object {
	var ws []*object
	for _, o := range c.objects {
		if o.Kind == "Deployment" || o.Kind == "Job" {
			ws = append(ws, o)
		}
	}
	return ws
}

// secretValue returns a Secret's value for key.
func (c *cluster) secretValue(name, key string) (string, bool) {
	s := c.byKind["Secret"][name]
	if s == nil {
		return "", false
	}
	if v, ok := s.StringData[key]; ok {
		return v, true
	}
	if v, ok := s.Data[key]; ok {
		b, err := base64.StdEncoding.DecodeString(v)
		return string(b), err == nil
	}
	return "", false
}

// env resolves a container's environment from the manifests.
func (c *cluster) env(tb testing.TB, where string, ct container) map[string]string {
	tb.Helper()
	env := map[string]string{}
	for _, ef := range ct.EnvFrom {
		switch {
		case ef.SecretRef != nil:
			s := c.byKind["Secret"][ef.SecretRef.Name]
			if s == nil {
				tb.Errorf("%s: envFrom names Secret %q, which no manifest defines", where, ef.SecretRef.Name)
				continue
			}
			for k := range s.StringData {
				env[k], _ = c.secretValue(s.Metadata.Name, k)
			}
			for k := range s.Data {
				env[k], _ = c.secretValue(s.Metadata.Name, k)
			}
		case ef.ConfigMapRef != nil:
			cm := c.byKind["ConfigMap"][ef.ConfigMapRef.Name]
			if cm == nil {
				tb.Errorf("%s: envFrom names ConfigMap %q, which no manifest defines", where, ef.ConfigMapRef.Name)
				continue
			}
			for k, v := range cm.Data {
				env[k] = v
			}
		}
	}
	for _, e := range ct.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			r := e.ValueFrom.SecretKeyRef
			v, ok := c.secretValue(r.Name, r.Key)
			if !ok && !r.Optional {
				tb.Errorf("%s: %s takes Secret %s key %s, which no manifest defines", where, e.Name, r.Name, r.Key)
			}
			env[e.Name] = v
		case e.ValueFrom.ConfigMapKeyRef != nil:
			r := e.ValueFrom.ConfigMapKeyRef
			cm := c.byKind["ConfigMap"][r.Name]
			if cm == nil || cm.Data[r.Key] == "" {
				tb.Errorf("%s: %s takes ConfigMap %s key %s, which no manifest defines", where, e.Name, r.Name, r.Key)
				continue
			}
			env[e.Name] = cm.Data[r.Key]
		}
	}
	return env
}

// configFile writes the file a container finds at its --config path (a
// ConfigMap or Secret volume) to a temporary file and returns its path.
func (c *cluster) configFile(tb testing.TB, where string, ps podSpec, ct container) string {
	tb.Helper()
	path := configArg(ct.Args)
	if path == "" {
		tb.Fatalf("%s: args %q have no --config", where, ct.Args)
	}
	for _, m := range ct.VolumeMounts {
		rel, err := filepath.Rel(m.MountPath, path)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		if m.SubPath != "" {
			rel = m.SubPath
		}
		for _, v := range ps.Volumes {
			if v.Name != m.Name {
				continue
			}
			var text string
			var ok bool
			switch {
			case v.ConfigMap != nil:
				cm := c.byKind["ConfigMap"][v.ConfigMap.Name]
				if cm != nil {
					text, ok = cm.Data[rel]
				}
			case v.Secret != nil:
				text, ok = c.secretValue(v.Secret.SecretName, rel)
			}
			if !ok {
				tb.Fatalf("%s: --config %s: volume %s has no key %s in the manifests", where, path, v.Name, rel)
			}
			p := filepath.Join(tb.TempDir(), "yidu.yaml")
			if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
				tb.Fatal(err)
			}
			return p
		}
	}
	tb.Fatalf("%s: --config %s is on no mounted volume", where, path)
	return ""
}

func TestKubernetesKinds(t *testing.T) {
	c := loadCluster(t)
	tests := []struct {
		kind  string
		names []string
	}{
		{"Namespace", []string{namespace}},
		{"ConfigMap", []string{"yidu-config"}},
		{"Secret", []string{"yidu-secrets"}},
		{"Deployment", []string{"yidu-receiver", "yidu-flushd", "yidu-dashboard"}},
		{"Service", []string{"yidu-receiver", "yidu-dashboard"}},
		{"Job", []string{"yidu-migrate"}},
		{"PodDisruptionBudget", []string{"yidu-receiver"}},
		{"HorizontalPodAutoscaler", []string{"yidu-receiver"}},
	}
	for _, tt := range tests {
		for _, name := range tt.names {
			if c.byKind[tt.kind][name] == nil {
				t.Errorf("no %s %s in deploy/k8s", tt.kind, name)
			}
		}
	}
	for _, o := range c.objects {
		if o.Kind == "Namespace" || o.Kind == "Kustomization" {
			continue
		}
		if o.Metadata.Namespace != namespace {
			t.Errorf("%s: %s %s in namespace %q; want %q", o.file, o.Kind, o.Metadata.Name, o.Metadata.Namespace, namespace)
		}
	}
}

func TestKubernetesKustomization(t *testing.T) {
	c := loadCluster(t)
	k := c.byKind["Kustomization"][""]
	if k == nil {
		t.Fatal("no kustomization.yaml in deploy/k8s")
	}
	listed := map[string]bool{}
	for _, r := range k.Resources {
		if _, err := os.Stat(filepath.Join(k8sDir, r)); err != nil {
			t.Errorf("kustomization lists %s: %v", r, err)
		}
		listed[r] = true
	}
	// The migration Job is applied on its own, before the Deployments
	// (its pod template is immutable; see migrate-job.yaml).
	for _, f := range yamlFiles(t, k8sDir) {
		base := filepath.Base(f)
		if base != "kustomization.yaml" && base != "migrate-job.yaml" && !listed[base] {
			t.Errorf("kustomization does not list %s", base)
		}
	}
}

func TestKubernetesWorkloads(t *testing.T) {
	c := loadCluster(t)
	for _, w := range c.workloads() {
		t.Run(w.Kind+"/"+w.Metadata.Name, func(t *testing.T) {
			ps := w.Spec.Template.Spec
			if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
				t.Errorf("automountServiceAccountToken must be false: yidu never calls the Kubernetes API")
			}
			if w.Kind == "Job" && ps.RestartPolicy != "Never" && ps.RestartPolicy != "OnFailure" {
				t.Errorf("Job restartPolicy %q; want Never or OnFailure", ps.RestartPolicy)
			}
			if w.Kind == "Deployment" && !labelsMatch(w.Spec.Selector, w.Spec.Template.Metadata.Labels) {
				t.Errorf("selector %v does not match the pod labels %v", w.Spec.Selector, w.Spec.Template.Metadata.Labels)
			}
			if len(ps.Containers) != 1 {
				t.Fatalf("%d containers; want 1", len(ps.Containers))
			}
			ct := ps.Containers[0]
			if len(ct.Command) != 0 {
				t.Errorf("command %q overrides the image's ENTRYPOINT /yidu; use args", ct.Command)
			}
			if len(ct.Args) == 0 {
				t.Fatal("no args: which yidu role?")
			}
			if _, ok := roles[ct.Args[0]]; !ok {
				t.Errorf("args[0] = %q; want one of receiver, dashboard, flushd, migrate", ct.Args[0])
			}
			checkNonRoot(t, ps.SecurityContext, ct.SecurityContext)
			for _, r := range []string{"cpu", "memory"} {
				if ct.Resources.Requests[r] == "" || ct.Resources.Limits[r] == "" {
					t.Errorf("resources: %s request %q, limit %q; want both", r, ct.Resources.Requests[r], ct.Resources.Limits[r])
				}
			}
		})
	}
}

// checkNonRoot asserts a pod and its container run as a non-root user
// without privileges, as the Namespace's restricted policy demands.
func checkNonRoot(tb testing.TB, pod, ct *securityContext) {
	tb.Helper()
	pick := func(f func(*securityContext) bool) bool {
		return (ct != nil && f(ct)) || (pod != nil && f(pod))
	}
	if !pick(func(s *securityContext) bool { return s.RunAsNonRoot != nil && *s.RunAsNonRoot }) {
		tb.Errorf("securityContext.runAsNonRoot is not true")
	}
	for _, s := range []*securityContext{pod, ct} {
		if s != nil && s.RunAsUser != nil && *s.RunAsUser == 0 {
			tb.Errorf("securityContext.runAsUser is 0 (root)")
		}
	}
	if !pick(func(s *securityContext) bool { return s.RunAsUser != nil }) {
		tb.Errorf("no runAsUser: the kubelet cannot verify a non-numeric image user is non-root")
	}
	if !pick(func(s *securityContext) bool { return s.SeccompProfile.Type == "RuntimeDefault" }) {
		tb.Errorf("seccompProfile is not RuntimeDefault")
	}
	if ct == nil {
		tb.Fatalf("container has no securityContext")
	}
	if ct.AllowPrivilegeEscalation == nil || *ct.AllowPrivilegeEscalation {
		tb.Errorf("allowPrivilegeEscalation is not false")
	}
	if ct.ReadOnlyRootFilesystem == nil || !*ct.ReadOnlyRootFilesystem {
		tb.Errorf("readOnlyRootFilesystem is not true")
	}
	if !slices.Contains(ct.Capabilities.Drop, "ALL") {
		tb.Errorf("capabilities.drop %v; want ALL", ct.Capabilities.Drop)
	}
}

// labelsMatch reports whether a selector (a Service's labels or a
// {matchLabels} block) selects labels.
func labelsMatch(selector map[string]any, labels map[string]string) bool {
	want := selector
	if ml, ok := selector["matchLabels"].(map[string]any); ok {
		want = ml
	}
	if len(want) == 0 {
		return false
	}
	for k, v := range want {
		if s, ok := v.(string); !ok || labels[k] != s {
			return false
		}
	}
	return true
}

// TestKubernetesConfig loads, for every container, the configuration it
// would see (the ConfigMap at its --config path and the environment the
// manifests give it) with config.Load, and checks its probes against it.
func TestKubernetesConfig(t *testing.T) {
	c := loadCluster(t)
	for _, w := range c.workloads() {
		t.Run(w.Kind+"/"+w.Metadata.Name, func(t *testing.T) {
			ps := w.Spec.Template.Spec
			if len(ps.Containers) == 0 || len(ps.Containers[0].Args) == 0 {
				t.Fatal("no container args")
			}
			ct := ps.Containers[0]
			where := w.file + ": " + w.Metadata.Name
			env := c.env(t, where, ct)
			cfg, read := loadConfig(t, c.configFile(t, where, ps, ct), env)
			checkConfig(t, where, cfg, read, env)
			checkProbes(t, cfg, ct)
		})
	}
}

// checkProbes asserts that a serving role has the probes of its role on
// the port its configuration listens on, and that others serve nothing.
func checkProbes(tb testing.TB, cfg config.Config, ct container) {
	tb.Helper()
	role := ct.Args[0]
	if roles[role] == "" {
		if len(ct.Ports) != 0 || ct.ReadinessProbe != nil || ct.LivenessProbe != nil {
			tb.Errorf("%s serves no HTTP, yet declares ports or probes", role)
		}
		return
	}
	port := listenPort(tb, cfg, role)
	if len(ct.Ports) != 1 || ct.Ports[0].ContainerPort != port {
		tb.Errorf("%s ports %+v; want one containerPort %d (its listen address)", role, ct.Ports, port)
	}
	resolve := func(p any) int {
		switch v := p.(type) {
		case int:
			return v
		case string:
			for _, cp := range ct.Ports {
				if cp.Name == v {
					return cp.ContainerPort
				}
			}
		}
		return -1
	}
	want := map[string][2]string{
		// readiness, liveness: an httpGet path, or "tcp".
		"receiver":  {"/readyz", "/healthz"},
		"dashboard": {"/login", "tcp"},
	}[role]
	for i, p := range []*probe{ct.ReadinessProbe, ct.LivenessProbe} {
		kind := [2]string{"readinessProbe", "livenessProbe"}[i]
		switch {
		case p == nil:
			tb.Errorf("%s has no %s", role, kind)
		case p.HTTPGet != nil:
			if p.HTTPGet.Path != want[i] || resolve(p.HTTPGet.Port) != port {
				tb.Errorf("%s %s: GET %s on port %v; want %s on %d", role, kind, p.HTTPGet.Path, p.HTTPGet.Port, want[i], port)
			}
		case p.TCPSocket != nil:
			if want[i] != "tcp" || resolve(p.TCPSocket.Port) != port {
				tb.Errorf("%s %s: TCP on port %v; want %s on %d", role, kind, p.TCPSocket.Port, want[i], port)
			}
		default:
			tb.Errorf("%s %s is neither httpGet nor tcpSocket (the image has no shell for exec)", role, kind)
		}
	}
}

func TestKubernetesReferences(t *testing.T) {
	c := loadCluster(t)
	deployments := c.byKind["Deployment"]
	t.Run("services", func(t *testing.T) {
		for _, s := range c.byKind["Service"] {
			var target *object
			for _, d := range deployments {
				if labelsMatch(s.Spec.Selector, d.Spec.Template.Metadata.Labels) {
					target = d
				}
			}
			if target == nil {
				t.Errorf("Service %s selects no Deployment (selector %v)", s.Metadata.Name, s.Spec.Selector)
				continue
			}
			ct := target.Spec.Template.Spec.Containers[0]
			for _, p := range s.Spec.Ports {
				found := false
				for _, cp := range ct.Ports {
					found = found || p.TargetPort == cp.Name || p.TargetPort == cp.ContainerPort
				}
				if !found {
					t.Errorf("Service %s port %d: targetPort %v is no port of Deployment %s", s.Metadata.Name, p.Port, p.TargetPort, target.Metadata.Name)
				}
			}
		}
	})
	receiver := deployments["yidu-receiver"]
	if receiver == nil {
		t.Fatal("no Deployment yidu-receiver")
	}
	t.Run("pdb", func(t *testing.T) {
		pdb := c.byKind["PodDisruptionBudget"]["yidu-receiver"]
		if pdb == nil {
			t.Fatal("no PodDisruptionBudget yidu-receiver")
		}
		if !labelsMatch(pdb.Spec.Selector, receiver.Spec.Template.Metadata.Labels) {
			t.Errorf("PodDisruptionBudget selector %v does not select the receiver's pods", pdb.Spec.Selector)
		}
		if pdb.Spec.MinAvailable == nil {
			t.Errorf("PodDisruptionBudget without minAvailable")
		}
	})
	t.Run("hpa", func(t *testing.T) {
		hpa := c.byKind["HorizontalPodAutoscaler"]["yidu-receiver"]
		if hpa == nil {
			t.Fatal("no HorizontalPodAutoscaler yidu-receiver")
		}
		ref := hpa.Spec.ScaleTargetRef
		if ref.Kind != "Deployment" || ref.Name != receiver.Metadata.Name {
			t.Errorf("HPA scales %s %s; want Deployment %s", ref.Kind, ref.Name, receiver.Metadata.Name)
		}
		if hpa.Spec.MinReplicas < 2 || hpa.Spec.MaxReplicas <= hpa.Spec.MinReplicas {
			t.Errorf("HPA replicas %d..%d; want at least 2, and room to grow", hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas)
		}
		cpu := false
		for _, m := range hpa.Spec.Metrics {
			cpu = cpu || (m.Type == "Resource" && m.Resource.Name == "cpu")
		}
		if !cpu {
			t.Errorf("HPA does not scale on CPU")
		}
		if ct := receiver.Spec.Template.Spec.Containers[0]; ct.Resources.Requests["cpu"] == "" {
			t.Errorf("HPA CPU utilization needs the receiver's CPU request")
		}
	})
}

// ---- Compose ----

type composeProject struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	Restart     string            `yaml:"restart"`
	// The map form only: the list form has no conditions.
	DependsOn   map[string]struct{ Condition string } `yaml:"depends_on"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

// interpolation is Compose's ${VAR}, ${VAR:-default}, ${VAR-default} and $$.
var interpolation = regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}`)

// interpolate resolves the file as Compose would with an empty shell
// environment: every variable takes its default.
func interpolate(tb testing.TB) func(string) string {
	return func(s string) string {
		return interpolation.ReplaceAllStringFunc(s, func(m string) string {
			if m == "$$" {
				return "$"
			}
			sub := interpolation.FindStringSubmatch(m)
			if strings.HasSuffix(sub[2], "?") {
				tb.Errorf("compose.yaml: %s requires a variable: the stack must start with defaults", m)
			}
			return sub[3]
		})
	}
}

func loadCompose(tb testing.TB) composeProject {
	tb.Helper()
	docs := yamlDocs(tb, composeFile, interpolate(tb))
	if len(docs) != 1 {
		tb.Fatalf("%s: %d documents; want 1", composeFile, len(docs))
	}
	var p composeProject
	if err := docs[0].Decode(&p); err != nil {
		tb.Fatalf("%s: %v", composeFile, err)
	}
	return p
}

func TestCompose(t *testing.T) {
	p := loadCompose(t)
	for _, name := range []string{"redis", "kafka", "mysql", "migrate", "receiver", "flushd", "dashboard"} {
		if _, ok := p.Services[name]; !ok {
			t.Errorf("compose.yaml has no service %s", name)
		}
	}
	for name, s := range p.Services {
		for dep, d := range s.DependsOn {
			target, ok := p.Services[dep]
			switch {
			case !ok:
				t.Errorf("%s depends on %s, which is no service", name, dep)
			case d.Condition == "service_healthy" && target.Healthcheck == nil:
				t.Errorf("%s waits for %s to be healthy, but %s has no healthcheck", name, dep, dep)
			case d.Condition == "service_completed_successfully" && target.Restart != "no":
				t.Errorf("%s waits for %s to complete, but %s restarts (%q)", name, dep, dep, target.Restart)
			case d.Condition != "service_healthy" && d.Condition != "service_completed_successfully":
				t.Errorf("%s depends on %s with condition %q; want service_healthy or service_completed_successfully", name, dep, d.Condition)
			}
		}
		if s.Image == "" && s.Build == nil {
			t.Errorf("service %s has neither image nor build", name)
		}
	}
	for _, name := range []string{"redis", "kafka", "mysql"} {
		if s := p.Services[name]; s.Healthcheck == nil || len(s.Healthcheck.Test) == 0 {
			t.Errorf("service %s has no healthcheck", name)
		}
	}
	for _, name := range []string{"receiver", "flushd", "dashboard"} {
		s := p.Services[name]
		for _, dep := range []string{"migrate", "redis", "kafka", "mysql"} {
			if _, ok := s.DependsOn[dep]; !ok {
				t.Errorf("%s does not wait for %s", name, dep)
			}
		}
	}
}

// yiduServices are the Compose services that run the yidu image.
func yiduServices(p composeProject) map[string]composeService {
	out := map[string]composeService{}
	for name, s := range p.Services {
		if len(s.Command) > 0 {
			if _, ok := roles[s.Command[0]]; ok {
				out[name] = s
			}
		}
	}
	return out
}

// mountedConfig returns the host file a Compose service mounts at its
// --config path.
func mountedConfig(tb testing.TB, name string, s composeService) string {
	tb.Helper()
	path := configArg(s.Command)
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == path && strings.HasPrefix(parts[0], ".") {
			return parts[0]
		}
	}
	tb.Fatalf("compose service %s: --config %q is not a mounted file", name, path)
	return ""
}

func TestComposeConfig(t *testing.T) {
	p := loadCompose(t)
	services := yiduServices(p)
	if len(services) < 4 {
		t.Fatalf("%d compose services run yidu; want migrate, receiver, flushd, dashboard", len(services))
	}
	for name, s := range services {
		t.Run(name, func(t *testing.T) {
			cfg, read := loadConfig(t, mountedConfig(t, name, s), s.Environment)
			checkConfig(t, "compose service "+name, cfg, read, s.Environment)
			role := s.Command[0]
			if roles[role] == "" {
				if len(s.Ports) != 0 {
					t.Errorf("%s serves no HTTP, yet publishes %v", role, s.Ports)
				}
				return
			}
			want := strconv.Itoa(listenPort(t, cfg, role))
			if len(s.Ports) != 1 || !strings.HasSuffix(s.Ports[0], ":"+want) {
				t.Errorf("%s publishes %v; want one port to container port %s", name, s.Ports, want)
			}
		})
	}
	t.Run("topic", func(t *testing.T) {
		init, ok := p.Services["kafka-init"]
		if !ok {
			t.Fatal("no kafka-init service creates the topic")
		}
		cfg, _ := loadConfig(t, mountedConfig(t, "receiver", p.Services["receiver"]), p.Services["receiver"].Environment)
		topic, parts := flagValue(init.Command, "--topic"), flagValue(init.Command, "--partitions")
		if topic != cfg.Kafka.Topic {
			t.Errorf("kafka-init creates topic %q; yidu uses %q", topic, cfg.Kafka.Topic)
		}
		if n, err := strconv.Atoi(parts); err != nil || n < 2 {
			t.Errorf("kafka-init --partitions %q; want several, so that flushd can scale", parts)
		}
	})
}

func flagValue(args []string, name string) string {
	if i := slices.Index(args, name); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// TestConfigFiles loads every yidu configuration file under deploy/ with the
// environment of the Compose services that mount it (none: the file alone
// must be complete).
func TestConfigFiles(t *testing.T) {
	files, err := filepath.Glob("yidu*.yaml")
	if err != nil || len(files) < 2 {
		t.Fatalf("yidu configuration files in deploy/: %v, %v; want the example and the Compose one", files, err)
	}
	p := loadCompose(t)
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			mounted := false
			for name, s := range yiduServices(p) {
				if filepath.Clean(mountedConfig(t, name, s)) == f {
					mounted = true
					cfg, read := loadConfig(t, f, s.Environment)
					checkConfig(t, f+" in "+name, cfg, read, s.Environment)
				}
			}
			if !mounted {
				cfg, _ := loadConfig(t, f, nil)
				for _, u := range cfg.Dashboard.Users {
					if _, err := bcrypt.Cost([]byte(u.PasswordHash)); err != nil {
						t.Errorf("dashboard user %s: password_hash is not bcrypt: %v", u.Name, err)
					}
				}
			}
		})
	}
}

// ---- Dockerfile ----

type instruction struct {
	line int
	op   string // upper case
	args string
}

// parseDockerfile returns the instructions (continuations joined,
// comments and blank lines dropped) grouped by stage.
func parseDockerfile(tb testing.TB, path string) [][]instruction {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var stages [][]instruction
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if strings.HasPrefix(line, "#") {
			continue // a comment inside a continued instruction
		}
		if body, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(line)
		op, args, _ := strings.Cut(cur.String(), " ")
		in := instruction{line: start, op: strings.ToUpper(op), args: strings.TrimSpace(args)}
		cur.Reset()
		if in.op == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			tb.Fatalf("%s:%d: %s before FROM", path, in.line, in.op)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], in)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return stages
}

func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t, dockerfile)
	if len(stages) < 2 {
		t.Fatalf("%d stages; want a build stage and a small final stage", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]
	if !strings.HasPrefix(build[0].args, "golang:1.26") {
		t.Errorf("build stage FROM %s; want golang:1.26", build[0].args)
	}

	var goBuild []string
	for _, st := range stages {
		for _, in := range st {
			for _, bad := range []string{"yidu-demo", "wecomsim", "yidu-bench"} {
				if strings.Contains(in.args, bad) {
					t.Errorf("line %d: %s %s: the image must hold only cmd/yidu", in.line, in.op, in.args)
				}
			}
			if in.op == "RUN" && strings.Contains(in.args, "go build") {
				goBuild = append(goBuild, in.args)
			}
		}
	}
	if len(goBuild) != 1 {
		t.Fatalf("%d RUN go build; want exactly one", len(goBuild))
	}
	fields := strings.Fields(goBuild[0])
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "./cmd/yidu"} {
		if !slices.Contains(fields, want) {
			t.Errorf("go build %q lacks %s", goBuild[0], want)
		}
	}

	base := final[0].args
	if !(strings.HasPrefix(base, "gcr.io/distroless/static") && strings.Contains(base, "nonroot")) && base != "scratch" {
		t.Errorf("final stage FROM %s; want distroless static nonroot or scratch", base)
	}
	var user, entrypoint string
	var expose, copies []string
	for _, in := range final[1:] {
		switch in.op {
		case "USER":
			user = in.args
		case "ENTRYPOINT":
			entrypoint = in.args
		case "EXPOSE":
			expose = append(expose, strings.Fields(in.args)...)
		case "COPY", "ADD":
			copies = append(copies, in.args)
		case "RUN":
			t.Errorf("line %d: RUN in the final stage (it has no shell)", in.line)
		}
	}
	if u, _, _ := strings.Cut(user, ":"); u == "" || u == "0" || u == "root" {
		t.Errorf("final stage USER %q; want a non-root user", user)
	}
	var ep []string
	if err := json.Unmarshal([]byte(entrypoint), &ep); err != nil || !slices.Equal(ep, []string{"/yidu"}) {
		t.Errorf("ENTRYPOINT %s; want [\"/yidu\"] (exec form)", entrypoint)
	}
	if len(copies) != 1 || !strings.HasPrefix(copies[0], "--from=") || !strings.HasSuffix(copies[0], "/yidu /yidu") {
		t.Errorf("final stage copies %q; want only the yidu binary from the build stage", copies)
	}

	// The image must expose the ports the manifests use.
	c := loadCluster(t)
	for _, d := range c.byKind["Deployment"] {
		for _, ct := range d.Spec.Template.Spec.Containers {
			for _, p := range ct.Ports {
				if !slices.Contains(expose, strconv.Itoa(p.ContainerPort)) {
					t.Errorf("Deployment %s uses port %d; the Dockerfile exposes %v", d.Metadata.Name, p.ContainerPort, expose)
				}
			}
		}
	}
}
