package deploycheck_test

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/bcrypt"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/cmd/internal/process"
)

// The tests run in deploy/ (TestMain moves there); every path is
// relative to it.
const (
	k8sDir      = "k8s"
	composeFile = "compose.yaml"
	dockerfile  = "Dockerfile"
	configDoc   = "../docs/configuration.md"
	namespace   = "yidu"
)

func TestMain(m *testing.M) {
	if err := os.Chdir("../../../deploy"); err != nil {
		fmt.Fprintln(os.Stderr, "deploycheck:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// roles are the yidu subcommands a container may run, with the config
// listen address whose port it serves ("" for none).
var roles = map[string]string{
	"receiver":  "receiver.listen",
	"dashboard": "dashboard.listen",
	"flushd":    "flushd.listen",
	"migrate":   "",
	"directory": "", // yidu directory sync, a (Cron)Job
}

// probePaths are each serving role's readiness and liveness paths
// (internal/probe, mounted by cmd/internal/process for every role).
var probePaths = map[string][2]string{
	"receiver":  {"/readyz", "/healthz"},
	"dashboard": {"/readyz", "/healthz"},
	"flushd":    {"/healthz", "/healthz"},
}

// secretUsers are the roles that may hold each app secret (least
// privilege): only the receiver verifies and decrypts callbacks
// (config.ValidateReceiver); the app secret sends cards and reminders
// (dashboard), exchanges tracked links' OAuth2 codes (receiver) and reads
// the directory (directory sync); the corp's contacts-sync secret, which
// reads the whole directory, belongs to the directory sync alone.
var secretUsers = map[string][]string{
	"token":            {"receiver"},
	"encoding_aes_key": {"receiver"},
	"secret":           {"receiver", "dashboard", "directory"},
	"contacts_secret":  {"directory"},
}

// appSecrets are the configuration fields of an app that hold secrets, as
// EnvName spells them.
var appSecrets = []string{"token", "encoding_aes_key", "secret", "contacts_secret"}

// secretValues returns a's secrets by field name.
func secretValues(a config.App) map[string]string {
	return map[string]string{"token": a.Token, "encoding_aes_key": a.EncodingAESKey, "secret": a.Secret, "contacts_secret": a.ContactsSecret}
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
	if err := process.Check(cfg); err != nil {
		tb.Fatalf("process.Check(%s) (the libraries' own checks): %v", path, err)
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
	for key, addr := range listenAddrs(cfg) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			tb.Errorf("%s: %s %q: %v", where, key, addr, err)
			continue
		}
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			tb.Errorf("%s: %s %q is loopback: unreachable from outside the container", where, key, addr)
		}
	}
}

// listenAddrs are the configuration's listen addresses by key.
func listenAddrs(cfg config.Config) map[string]string {
	return map[string]string{
		"receiver.listen":  cfg.Receiver.Listen,
		"dashboard.listen": cfg.Dashboard.Listen,
		"flushd.listen":    cfg.Flushd.Listen,
	}
}

// checkRole asserts that the configuration role runs with (file and
// environment together) starts it, and holds no secret role does not use.
func checkRole(tb testing.TB, where, role string, cfg config.Config) {
	tb.Helper()
	if role == "receiver" {
		if err := cfg.ValidateReceiver(); err != nil {
			tb.Errorf("%s: the receiver would refuse to start: %v", where, err)
		}
	}
	for _, a := range cfg.Apps {
		for field, value := range secretValues(a) {
			if value != "" && !slices.Contains(secretUsers[field], role) {
				tb.Errorf("%s: %s holds app %s's %s (%s); only %v need it", where, role, a.Name, field, config.EnvName(a.Name, field), secretUsers[field])
			}
		}
	}
	if role != "dashboard" && len(cfg.Dashboard.Tokens) > 0 {
		tb.Errorf("%s: %s holds %d API tokens; only the dashboard serves /api/v1", where, role, len(cfg.Dashboard.Tokens))
	}
}

// checkSecretEnv asserts that role is not even handed a variable for a
// secret it does not use: a placeholder left empty (an optional secret)
// escapes checkRole, which sees values.
func checkSecretEnv(tb testing.TB, where, role string, cfg config.Config, env map[string]string) {
	tb.Helper()
	for _, a := range cfg.Apps {
		for _, field := range appSecrets {
			name := config.EnvName(a.Name, field)
			if _, set := env[name]; set && !slices.Contains(secretUsers[field], role) {
				tb.Errorf("%s: %s is given %s; only %v may hold app %s's %s", where, role, name, secretUsers[field], a.Name, field)
			}
		}
	}
}

// envDoc returns how docs/configuration.md names variable name: app
// secrets appear as YIDU_APP_<NAME>_TOKEN and so on.
func envDoc(cfg config.Config, name string) string {
	for _, a := range cfg.Apps {
		for _, f := range appSecrets {
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
	addr := listenAddrs(cfg)[roles[role]]
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
	// Kustomization and Component.
	Resources  []string `yaml:"resources"`
	Components []string `yaml:"components"`
	Images     []struct {
		Name    string `yaml:"name"`
		NewName string `yaml:"newName"`
		NewTag  string `yaml:"newTag"`
		Digest  string `yaml:"digest"`
	} `yaml:"images"`
	Spec struct {
		Replicas *int `yaml:"replicas"`
		// Deployment, StatefulSet, PDB: {matchLabels: …}; Service: the labels.
		Selector map[string]any `yaml:"selector"`
		// StatefulSet.
		ServiceName         string `yaml:"serviceName"`
		PodManagementPolicy string `yaml:"podManagementPolicy"`
		// Service.
		ClusterIP string      `yaml:"clusterIP"`
		Template  podTemplate `yaml:"template"`
		// CronJob; loadCluster copies its pod template to Template.
		Schedule          string `yaml:"schedule"`
		ConcurrencyPolicy string `yaml:"concurrencyPolicy"`
		JobTemplate       struct {
			Spec struct {
				Template podTemplate `yaml:"template"`
			} `yaml:"spec"`
		} `yaml:"jobTemplate"`
		// PodDisruptionBudget.
		MaxUnavailable any `yaml:"maxUnavailable"`
		// NetworkPolicy.
		PodSelector map[string]any `yaml:"podSelector"`
		PolicyTypes []string       `yaml:"policyTypes"`
		Ingress     []struct {
			From []struct {
				NamespaceSelector map[string]any `yaml:"namespaceSelector"`
				PodSelector       map[string]any `yaml:"podSelector"`
			} `yaml:"from"`
			Ports []struct {
				Port any `yaml:"port"`
			} `yaml:"ports"`
		} `yaml:"ingress"`
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

type podTemplate struct {
	Metadata struct {
		Labels      map[string]string `yaml:"labels"`
		Annotations map[string]string `yaml:"annotations"`
	} `yaml:"metadata"`
	Spec podSpec `yaml:"spec"`
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
			Items      []struct {
				Key  string `yaml:"key"`
				Path string `yaml:"path"`
			} `yaml:"items"`
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
			FieldRef        *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	EnvFrom []struct {
		SecretRef    *keyRef `yaml:"secretRef"`
		ConfigMapRef *keyRef `yaml:"configMapRef"`
	} `yaml:"envFrom"`
	VolumeMounts   []volumeMount `yaml:"volumeMounts"`
	ReadinessProbe *probe        `yaml:"readinessProbe"`
	LivenessProbe  *probe        `yaml:"livenessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext *securityContext `yaml:"securityContext"`
}

type volumeMount struct {
	Name      string `yaml:"name"`
	MountPath string `yaml:"mountPath"`
	SubPath   string `yaml:"subPath"`
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
			if o.Kind == "CronJob" {
				// Checked as the pods it runs.
				o.Spec.Template = o.Spec.JobTemplate.Spec.Template
			}
			if c.byKind[o.Kind] == nil {
				c.byKind[o.Kind] = map[string]*object{}
			}
			if o.Kind == "CronJob" {
				o.Spec.Template = o.Spec.JobTemplate.Spec.Template
			}
			if o.Kind == "Kustomization" || o.Kind == "Component" {
				// Nameless: one per directory.
				o.Metadata.Name = filepath.Dir(f)
			} else {
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

// podKinds are the kinds that run yidu pods.
var podKinds = []string{"Deployment", "StatefulSet", "Job", "CronJob"}

// runsToCompletion reports whether kind's pods end (no selector, no
// Service): Jobs and CronJobs.
func runsToCompletion(kind string) bool { return kind == "Job" || kind == "CronJob" }

// workloads are the Deployments, StatefulSets, Jobs and CronJobs.
func (c *cluster) workloads() []*object {
	var ws []*object
	for _, o := range c.objects {
		if slices.Contains(podKinds, o.Kind) {
			ws = append(ws, o)
		}
	}
	return ws
}

// secretValue returns a Secret's value for key, its placeholders filled
// in as an operator would (secret.example.yaml ships only placeholders).
func (c *cluster) secretValue(name, key string) (string, bool) {
	s := c.byKind["Secret"][name]
	if s == nil {
		return "", false
	}
	if v, ok := s.StringData[key]; ok {
		return fillPlaceholders(v), true
	}
	if v, ok := s.Data[key]; ok {
		b, err := base64.StdEncoding.DecodeString(v)
		return fillPlaceholders(string(b)), err == nil
	}
	return "", false
}

// Placeholders of secret.example.yaml yidu would refuse or fail on, and
// what an operator puts there instead.
const (
	placeholderToken = "REPLACE-with-a-long-random-api-token"
	placeholderHash  = "REPLACE-with-the-output-of-yidu-hash-password"
)

var operatorHash = sync.OnceValue(func() string {
	h, err := bcrypt.GenerateFromPassword([]byte("an operator's own password"), bcrypt.MinCost)
	if err != nil {
		panic(err)
	}
	return string(h)
})

func fillPlaceholders(v string) string {
	v = strings.ReplaceAll(v, placeholderToken, "deploycheck-operator-token-0123456789")
	return strings.ReplaceAll(v, placeholderHash, operatorHash())
}

// env resolves the environment of workload w's container ct from the
// manifests.
func (c *cluster) env(tb testing.TB, where string, w *object, ct container) map[string]string {
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
		case e.ValueFrom.FieldRef != nil:
			switch f := e.ValueFrom.FieldRef.FieldPath; f {
			case "metadata.name":
				env[e.Name] = podName(w)
			case "metadata.namespace":
				env[e.Name] = w.Metadata.Namespace
			default:
				tb.Errorf("%s: %s takes field %s, which this test does not resolve", where, e.Name, f)
			}
		default:
			tb.Errorf("%s: %s has a valueFrom this test does not resolve", where, e.Name)
		}
	}
	return env
}

// podName returns the name of one of w's pods: a StatefulSet's are
// <name>-<ordinal>; the others' carry a random suffix.
func podName(w *object) string {
	if w.Kind == "StatefulSet" {
		return w.Metadata.Name + "-0"
	}
	return w.Metadata.Name + "-7d4b9c8f6-x2x9k"
}

// configFile writes the file a container finds at its --config path (a
// ConfigMap or Secret volume) to a temporary file and returns its path.
func (c *cluster) configFile(tb testing.TB, where string, ps podSpec, ct container) string {
	tb.Helper()
	path := configArg(ct.Args)
	if path == "" {
		tb.Fatalf("%s: args %q have no --config", where, ct.Args)
	}
	return c.mountedFile(tb, where, ps, ct, path)
}

// mountedFile writes the file a container finds at path (a key of a
// ConfigMap or Secret volume mounted over it) to a temporary file and
// returns that file's path.
func (c *cluster) mountedFile(tb testing.TB, where string, ps podSpec, ct container, path string) string {
	tb.Helper()
	// The deepest mount over path wins, as in the container.
	mounts := slices.Clone(ct.VolumeMounts)
	slices.SortFunc(mounts, func(a, b volumeMount) int { return len(b.MountPath) - len(a.MountPath) })
	for _, m := range mounts {
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
				key := rel
				if len(v.Secret.Items) > 0 {
					key = ""
					for _, it := range v.Secret.Items {
						if it.Path == rel {
							key = it.Key
						}
					}
				}
				text, ok = c.secretValue(v.Secret.SecretName, key)
			}
			if !ok {
				tb.Fatalf("%s: %s: volume %s has no key %s in the manifests", where, path, v.Name, rel)
			}
			p := filepath.Join(tb.TempDir(), filepath.Base(path))
			if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
				tb.Fatal(err)
			}
			return p
		}
	}
	tb.Fatalf("%s: %s is on no mounted volume", where, path)
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
		// secret.example.yaml: the keys, for reference; never applied.
		{"Secret", []string{"yidu-secrets"}},
		{"Deployment", []string{"yidu-dashboard"}},
		// receiver: a volume per pod for its spool (receiver.spool_dir).
		{"StatefulSet", []string{"yidu-receiver"}},
		{"CronJob", []string{"yidu-directory-sync"}},
		{"NetworkPolicy", []string{"yidu-default-deny-ingress", "yidu-receiver", "yidu-dashboard", "yidu-flushd"}},
		// flushd: stable pod names for static group membership.
		{"StatefulSet", []string{"yidu-flushd"}},
		{"Service", []string{"yidu-receiver", "yidu-dashboard", "yidu-flushd"}},
		{"Job", []string{"yidu-migrate"}},
		// yidu directory sync: the only holder of the contacts-sync secret.
		{"CronJob", []string{"yidu-directory-sync"}},
		{"PodDisruptionBudget", []string{"yidu-receiver", "yidu-dashboard", "yidu-flushd"}},
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
		if o.Kind == "Namespace" || o.Kind == "Kustomization" || o.Kind == "Component" {
			continue
		}
		if o.Metadata.Namespace != namespace {
			t.Errorf("%s: %s %s in namespace %q; want %q", o.file, o.Kind, o.Metadata.Name, o.Metadata.Namespace, namespace)
		}
	}
}

// exampleSecret is the reference Secret: its keys, placeholders for
// values; applied by no kustomization.
const exampleSecret = "secret.example.yaml"

// imageComponent is the kustomize Component that sets the image of every
// yidu workload, the migration Job included.
const imageComponent = "k8s/image"

func TestKubernetesKustomization(t *testing.T) {
	c := loadCluster(t)
	kusts := c.byKind["Kustomization"]
	if kusts[k8sDir] == nil {
		t.Fatal("no kustomization.yaml in deploy/k8s")
	}
	comp := c.byKind["Component"][imageComponent]
	if comp == nil {
		t.Fatalf("no kustomize Component %s (the image, set once)", imageComponent)
	}
	if len(comp.Images) != 1 || comp.Images[0].Name != "yidu" || (comp.Images[0].NewTag == "" && comp.Images[0].Digest == "") {
		t.Errorf("%s images = %+v; want one, for name yidu, with a tag or digest", imageComponent, comp.Images)
	}
	listed := map[string]string{} // file → the kustomization listing it
	for dir, k := range kusts {
		for _, r := range k.Resources {
			f := filepath.Join(dir, r)
			if _, err := os.Stat(f); err != nil {
				t.Errorf("%s lists %s: %v", dir, r, err)
			}
			listed[f] = dir
		}
		hasWorkload := false
		for _, o := range c.objects {
			if listed[o.file] == dir && slices.Contains(podKinds, o.Kind) {
				hasWorkload = true
			}
		}
		uses := false
		for _, cp := range k.Components {
			uses = uses || filepath.Join(dir, cp) == imageComponent
		}
		if hasWorkload && !uses {
			t.Errorf("%s runs yidu but does not use the component %s: its image would not be managed with the others'", dir, imageComponent)
		}
	}
	for _, f := range yamlFiles(t, k8sDir) {
		base := filepath.Base(f)
		if base == "kustomization.yaml" || base == exampleSecret {
			continue
		}
		if listed[f] == "" {
			t.Errorf("no kustomization lists %s", f)
		}
	}
	// kubectl apply -k must never overwrite the Secret an operator made
	// from a vault with placeholders: no Secret, and no generator.
	for _, o := range c.objects {
		if o.Kind == "Secret" && listed[o.file] != "" {
			t.Errorf("%s lists %s, which holds Secret %s: applying it would overwrite the real one", listed[o.file], o.file, o.Metadata.Name)
		}
	}
	for dir := range kusts {
		b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "secretGenerator") {
			t.Errorf("%s has a secretGenerator: it would replace the Secret made from the vault", dir)
		}
	}
	// Every workload names the image the component rewrites.
	for _, w := range c.workloads() {
		for _, ct := range w.Spec.Template.Spec.Containers {
			if name, _, _ := strings.Cut(ct.Image, ":"); name != "yidu" {
				t.Errorf("%s %s runs image %q; want yidu (set by %s)", w.Kind, w.Metadata.Name, ct.Image, imageComponent)
			}
		}
	}
}

// TestExampleSecret: secret.example.yaml holds placeholders only, and
// yidu refuses to start with the one it could otherwise accept.
func TestExampleSecret(t *testing.T) {
	c := loadCluster(t)
	s := c.byKind["Secret"]["yidu-secrets"]
	if s == nil || filepath.Base(s.file) != exampleSecret {
		t.Fatalf("Secret yidu-secrets is not in %s", exampleSecret)
	}
	for k, v := range s.StringData {
		if v != "" && !strings.Contains(v, "REPLACE") {
			t.Errorf("%s: %s = %q; want a REPLACE placeholder (or empty)", exampleSecret, k, v)
		}
	}
	if _, err := config.Load("", func(k string) string {
		return map[string]string{"YIDU_API_TOKEN": s.StringData["api-token"]}[k]
	}); err == nil || !strings.Contains(err.Error(), "YIDU_API_TOKEN") {
		t.Errorf("config.Load with the example api-token = %v; want a refusal naming YIDU_API_TOKEN", err)
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
			if runsToCompletion(w.Kind) && ps.RestartPolicy != "Never" && ps.RestartPolicy != "OnFailure" {
				t.Errorf("Job restartPolicy %q; want Never or OnFailure", ps.RestartPolicy)
			}
			if !runsToCompletion(w.Kind) && !labelsMatch(w.Spec.Selector, w.Spec.Template.Metadata.Labels) {
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
				t.Errorf("args[0] = %q; want one of receiver, dashboard, flushd, migrate, directory", ct.Args[0])
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

// selectsWorkload reports whether selector selects the pods of some
// workload.
func selectsWorkload(c *cluster, selector map[string]any) bool {
	for _, w := range c.workloads() {
		if labelsMatch(selector, w.Spec.Template.Metadata.Labels) {
			return true
		}
	}
	return false
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
			env := c.env(t, where, w, ct)
			// Files named by the environment are read from their volumes.
			loadEnv := maps.Clone(env)
			if p := env["YIDU_DASHBOARD_USERS_FILE"]; p != "" {
				loadEnv["YIDU_DASHBOARD_USERS_FILE"] = c.mountedFile(t, where, ps, ct, p)
			}
			cfg, read := loadConfig(t, c.configFile(t, where, ps, ct), loadEnv)
			checkConfig(t, where, cfg, read, env)
			checkRole(t, where, ct.Args[0], cfg)
			checkSecretEnv(t, where, ct.Args[0], cfg, env)
			// The sync ends the reading page sessions of members it finds
			// gone (page.Sessions.Revoke): without Redis's password a
			// managed Redis refuses it and they read on for 30 days.
			if _, ok := env["YIDU_REDIS_PASSWORD"]; ct.Args[0] == "directory" && !ok {
				t.Errorf("%s: the directory sync has no YIDU_REDIS_PASSWORD; members it finds gone keep their reading sessions", where)
			}
			checkProbes(t, cfg, ct)
			checkScrape(t, cfg, ct.Args[0], w.Spec.Template.Metadata.Annotations)
		})
	}
}

// checkScrape asserts that a serving role's pods ask Prometheus to scrape
// /metrics on the port its configuration listens on.
func checkScrape(tb testing.TB, cfg config.Config, role string, annotations map[string]string) {
	tb.Helper()
	if roles[role] == "" {
		return
	}
	want := map[string]string{
		"prometheus.io/scrape": "true",
		"prometheus.io/port":   strconv.Itoa(listenPort(tb, cfg, role)),
		"prometheus.io/path":   "/metrics",
	}
	for k, v := range want {
		if annotations[k] != v {
			tb.Errorf("%s pod annotation %s = %q; want %q", role, k, annotations[k], v)
		}
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
	// readiness, liveness: an httpGet path, or "tcp".
	want := probePaths[role]
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
	t.Run("services", func(t *testing.T) {
		for _, s := range c.byKind["Service"] {
			var target *object
			for _, w := range c.workloads() {
				if !runsToCompletion(w.Kind) && labelsMatch(s.Spec.Selector, w.Spec.Template.Metadata.Labels) {
					target = w
				}
			}
			if target == nil {
				t.Errorf("Service %s selects no Deployment or StatefulSet (selector %v)", s.Metadata.Name, s.Spec.Selector)
				continue
			}
			ct := target.Spec.Template.Spec.Containers[0]
			for _, p := range s.Spec.Ports {
				found := false
				for _, cp := range ct.Ports {
					found = found || p.TargetPort == cp.Name || p.TargetPort == cp.ContainerPort
				}
				if !found {
					t.Errorf("Service %s port %d: targetPort %v is no port of %s %s", s.Metadata.Name, p.Port, p.TargetPort, target.Kind, target.Metadata.Name)
				}
			}
		}
	})
	t.Run("flushd", func(t *testing.T) {
		checkFlushd(t, c)
	})
	// A StatefulSet: a volume per pod for its spool (receiver.spool_dir).
	receiver := c.byKind["StatefulSet"]["yidu-receiver"]
	if receiver == nil {
		t.Fatal("no StatefulSet yidu-receiver")
	}
	t.Run("pdb", func(t *testing.T) {
		for _, w := range c.workloads() {
			if runsToCompletion(w.Kind) {
				continue
			}
			var pdb *object
			for _, p := range c.byKind["PodDisruptionBudget"] {
				if labelsMatch(p.Spec.Selector, w.Spec.Template.Metadata.Labels) {
					pdb = p
				}
			}
			switch {
			case pdb == nil:
				t.Errorf("no PodDisruptionBudget selects %s %s's pods", w.Kind, w.Metadata.Name)
			case (pdb.Spec.MinAvailable == nil) == (pdb.Spec.MaxUnavailable == nil):
				t.Errorf("PodDisruptionBudget %s: want exactly one of minAvailable, maxUnavailable", pdb.Metadata.Name)
			}
		}
		for _, p := range c.byKind["PodDisruptionBudget"] {
			if !selectsWorkload(c, p.Spec.Selector) {
				t.Errorf("PodDisruptionBudget %s selects no workload", p.Metadata.Name)
			}
		}
	})
	t.Run("hpa", func(t *testing.T) {
		hpa := c.byKind["HorizontalPodAutoscaler"]["yidu-receiver"]
		if hpa == nil {
			t.Fatal("no HorizontalPodAutoscaler yidu-receiver")
		}
		ref := hpa.Spec.ScaleTargetRef
		if ref.Kind != "StatefulSet" || ref.Name != receiver.Metadata.Name {
			t.Errorf("HPA scales %s %s; want StatefulSet %s", ref.Kind, ref.Name, receiver.Metadata.Name)
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

// partitionsFlag is the topic creation command config.yaml documents.
var partitionsFlag = regexp.MustCompile(`--partitions\s+(\d+)`)

// checkFlushd asserts that every flushd is a static group member with an
// id of its own: a StatefulSet pod passing its stable name, governed by a
// headless Service, started in parallel, with no more replicas than the
// topic config.yaml tells operators to create has partitions.
func checkFlushd(tb testing.TB, c *cluster) {
	tb.Helper()
	found := false
	for _, w := range c.workloads() {
		ct := w.Spec.Template.Spec.Containers
		if len(ct) == 0 || len(ct[0].Args) == 0 || ct[0].Args[0] != "flushd" {
			continue
		}
		found = true
		where := w.Kind + " " + w.Metadata.Name
		if w.Kind != "StatefulSet" {
			tb.Errorf("%s runs flushd; want a StatefulSet (stable pod names as flushd.instance_id)", where)
			continue
		}
		idFromName := false
		for _, e := range ct[0].Env {
			if e.Name == "YIDU_FLUSHD_INSTANCE_ID" {
				idFromName = e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name"
			}
		}
		if !idFromName {
			tb.Errorf("%s: YIDU_FLUSHD_INSTANCE_ID is not the pod name (valueFrom.fieldRef metadata.name): pods would share an id or have none", where)
		}
		if w.Spec.PodManagementPolicy != "Parallel" {
			tb.Errorf("%s: podManagementPolicy %q; want Parallel (no ordered state)", where, w.Spec.PodManagementPolicy)
		}
		svc := c.byKind["Service"][w.Spec.ServiceName]
		switch {
		case svc == nil:
			tb.Errorf("%s: serviceName %q names no Service", where, w.Spec.ServiceName)
		case svc.Spec.ClusterIP != "None":
			tb.Errorf("%s: Service %s has clusterIP %q; a StatefulSet's governing Service is headless (None)", where, svc.Metadata.Name, svc.Spec.ClusterIP)
		case !labelsMatch(svc.Spec.Selector, w.Spec.Template.Metadata.Labels):
			tb.Errorf("%s: Service %s does not select its pods", where, svc.Metadata.Name)
		}
		cm := c.byKind["ConfigMap"]["yidu-config"]
		if cm == nil {
			tb.Fatal("no ConfigMap yidu-config")
		}
		m := partitionsFlag.FindStringSubmatch(cm.Data["yidu.yaml"])
		if m == nil {
			tb.Fatalf("ConfigMap yidu-config does not say how many partitions to create (--partitions N)")
		}
		parts, _ := strconv.Atoi(m[1])
		replicas := 1 // the API's default
		if w.Spec.Replicas != nil {
			replicas = *w.Spec.Replicas
		}
		if replicas < 1 || replicas > parts {
			tb.Errorf("%s: replicas %d; want 1..%d (the topic's partitions: more sit idle)", where, replicas, parts)
		}
	}
	if !found {
		tb.Errorf("no workload runs flushd")
	}
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

// composeEnv is the environment an operator gives the Compose stack (its
// .env): a value for every required variable.
var composeEnv = map[string]string{
	"MYSQL_PASSWORD":               "operator-mysql-password",
	"MYSQL_ROOT_PASSWORD":          "operator-root-password",
	"YIDU_APP_HR_TOKEN":            "operatorToken",
	"YIDU_APP_HR_ENCODING_AES_KEY": "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C",
	"YIDU_API_TOKEN":               "operator-api-token-0123456789",
	"YIDU_DASHBOARD_USERS":         "[{name: admin, password_hash: '" + placeholderHash + "', corps: ['*']}]",
}

// secretVar is a Compose variable that carries a secret: it must be
// required (${VAR:?…}), never defaulted to a value everyone knows.
var secretVar = regexp.MustCompile(`PASSWORD|TOKEN|_KEY|SECRET|USERS`)

// interpolate resolves the file as Compose would with composeEnv as the
// shell environment, and checks every secret variable is required.
func interpolate(tb testing.TB) func(string) string {
	return func(s string) string {
		return interpolation.ReplaceAllStringFunc(s, func(m string) string {
			if m == "$$" {
				return "$"
			}
			sub := interpolation.FindStringSubmatch(m)
			name, op, def := sub[1], sub[2], sub[3]
			required := strings.HasSuffix(op, "?")
			if secretVar.MatchString(name) && !required && def != "" {
				tb.Errorf("compose.yaml: %s defaults a secret; require it with ${%s:?…}", m, name)
			}
			if v, ok := composeEnv[name]; ok {
				v = fillPlaceholders(v)
				if strings.HasPrefix(v, "[") {
					// Compose substitutes into the parsed string; this test
					// substitutes into the text, so keep it one scalar.
					v = strconv.Quote(v)
				}
				return v
			}
			if required {
				tb.Errorf("compose.yaml: %s is required but the test's composeEnv has no value", m)
			}
			return def
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
			where := "compose service " + name
			cfg, read := loadConfig(t, mountedConfig(t, name, s), s.Environment)
			checkConfig(t, where, cfg, read, s.Environment)
			role := s.Command[0]
			checkRole(t, where, role, cfg)
			checkSecretEnv(t, where, role, cfg, s.Environment)
			checkHealthcheck(t, where, cfg, role, s)
			// flushd publishes nothing: --scale would collide on a host port.
			if roles[role] == "" || role == "flushd" {
				if len(s.Ports) != 0 {
					t.Errorf("%s publishes %v; want none", name, s.Ports)
				}
				return
			}
			want := strconv.Itoa(listenPort(t, cfg, role))
			if len(s.Ports) != 1 || !strings.HasSuffix(s.Ports[0], ":"+want) {
				t.Errorf("%s publishes %v; want one port to container port %s", name, s.Ports, want)
			}
			// A local stack: reachable from this machine only, behind
			// whatever proxy the operator puts in front.
			for _, p := range s.Ports {
				if !strings.HasPrefix(p, "127.0.0.1:") {
					t.Errorf("%s publishes %s on every interface; bind it to 127.0.0.1", name, p)
				}
			}
		})
	}
	// The receiver's spool (on by default in data_dir) must be on a named
	// volume: in the container's own layer it would go with the container.
	t.Run("spool volume", func(t *testing.T) {
		rcv := p.Services["receiver"]
		cfg, _ := loadConfig(t, mountedConfig(t, "receiver", rcv), rcv.Environment)
		dir := cfg.Receiver.SpoolDir
		if dir == "" || dir == config.SpoolOff {
			t.Fatalf("the compose receiver has no spool (receiver.spool_dir %q, data_dir %q)", dir, cfg.DataDir)
		}
		on := false
		for _, v := range rcv.Volumes {
			src, dst, _ := strings.Cut(v, ":")
			dst, _, _ = strings.Cut(dst, ":")
			_, named := p.Volumes[src]
			if named && (dir == dst || strings.HasPrefix(dir, dst+"/")) {
				on = true
			}
		}
		if !on {
			t.Errorf("the receiver's spool %s is on no named volume (volumes %v)", dir, rcv.Volumes)
		}
	})
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

// checkHealthcheck asserts that a serving role's Compose service checks
// itself with the image's own probe, `/yidu healthcheck URL` (no shell or
// curl in distroless), on one of its probe paths and its listen port.
func checkHealthcheck(tb testing.TB, where string, cfg config.Config, role string, s composeService) {
	tb.Helper()
	if roles[role] == "" {
		if s.Healthcheck != nil {
			tb.Errorf("%s: %s serves no HTTP, yet has a healthcheck", where, role)
		}
		return
	}
	if s.Healthcheck == nil {
		tb.Errorf("%s: no healthcheck", where)
		return
	}
	test := s.Healthcheck.Test
	if len(test) != 4 || test[0] != "CMD" || test[1] != "/yidu" || test[2] != "healthcheck" {
		tb.Errorf("%s: healthcheck %q; want [CMD /yidu healthcheck URL] (exec form: the image has no shell)", where, test)
		return
	}
	u, err := url.Parse(test[3])
	if err != nil {
		tb.Errorf("%s: healthcheck URL %q: %v", where, test[3], err)
		return
	}
	addr := listenAddrs(cfg)[roles[role]]
	if host, _, _ := net.SplitHostPort(addr); host != "" && !net.ParseIP(host).IsUnspecified() {
		tb.Errorf("%s: %s %q: 127.0.0.1 does not reach it; listen on 0.0.0.0", where, roles[role], addr)
	}
	port := strconv.Itoa(listenPort(tb, cfg, role))
	paths := probePaths[role]
	if u.Scheme != "http" || u.Hostname() != "127.0.0.1" || u.Port() != port || !slices.Contains(paths[:], u.Path) {
		tb.Errorf("%s: healthcheck GETs %s; want http://127.0.0.1:%s and one of %v", where, test[3], port, probePaths[role])
	}
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
	var user, entrypoint, dataDir string
	var expose, copies []string
	for _, in := range final[1:] {
		switch in.op {
		case "ENV":
			if v, ok := strings.CutPrefix(in.args, "YIDU_DATA_DIR="); ok {
				dataDir = v
			}
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
	// The binary, and data_dir (the default spool) owned by the runtime
	// user, so a volume mounted there starts writable.
	if len(copies) != 2 || !strings.HasPrefix(copies[0], "--from=") || !strings.HasSuffix(copies[0], "/yidu /yidu") {
		t.Errorf("final stage copies %q; want the yidu binary from the build stage, then data_dir", copies)
	} else if want := "--chown=" + user + " "; dataDir == "" || !strings.Contains(copies[1], want) || !strings.HasSuffix(copies[1], " "+dataDir) {
		t.Errorf("final stage copies %q with ENV YIDU_DATA_DIR=%q; want data_dir created %sby the runtime user", copies[1], dataDir, want)
	}

	// The image must expose the ports the manifests use.
	c := loadCluster(t)
	for _, w := range c.workloads() {
		for _, ct := range w.Spec.Template.Spec.Containers {
			for _, p := range ct.Ports {
				if !slices.Contains(expose, strconv.Itoa(p.ContainerPort)) {
					t.Errorf("%s %s uses port %d; the Dockerfile exposes %v", w.Kind, w.Metadata.Name, p.ContainerPort, expose)
				}
			}
		}
	}
}
