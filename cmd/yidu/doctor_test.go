package main

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/callback"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/wecom"
)

// noReads is the ReadRecorder of a receiver that only answers URL
// verification: recording a read would call the nil interface and panic,
// failing the test.
type noReads struct{ callback.ReadRecorder }

// TestDoctor runs `yidu doctor --app hr` as an operator setting up an app
// would: against a fake WeCom as strict as WeCom about secrets and visible
// ranges, and a receiver reached at receiver.public_url as WeCom reaches it.
func TestDoctor(t *testing.T) {
	const (
		corp   = "wwdoctor"
		aesKey = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
	)
	api := fakewecom.Start(t, fakewecom.New(fakewecom.Corp{
		CorpID: corp,
		Apps: []fakewecom.App{
			{AgentID: 1000002, Secret: "wide", ReportEnter: true, RedirectDomain: "yidu.example.com"},
			{AgentID: 1000003, Secret: "narrow", VisibleDepartments: []int{2}, NoDepartmentNames: true},
		},
		ContactsSecret: "contacts",
		Departments:    []fakewecom.Department{{ID: 1, Name: "总部"}, {ID: 2, ParentID: 1, Name: "HR"}},
		Users:          []fakewecom.User{{UserID: "zhangsan", Name: "张三", Departments: []int{1}}, {UserID: "lisi", Name: "李四", Departments: []int{2}}},
	}))
	receiver := func(token string) string {
		rc, err := callback.New(noReads{}, callback.Options{Apps: []callback.App{{
			App: yidu.App{Name: "hr", CorpID: corp, AgentID: 1000002}, Token: token, EncodingAESKey: aesKey}}})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(rc.Routes())
		t.Cleanup(srv.Close)
		return srv.URL
	}
	good, wrongToken := receiver("t0k"), receiver("another-token")
	config := func(t *testing.T, agent, publicURL string) string {
		p := filepath.Join(t.TempDir(), "yidu.yaml")
		text := "wecom: {api_base: \"" + api + "\"}\n"
		if publicURL != "" {
			text += "receiver: {public_url: \"" + publicURL + "\"}\n"
		}
		text += "apps:\n  - {name: hr, corp_id: " + corp + ", agent_id: " + agent + ", token: t0k, encoding_aes_key: " + aesKey + "}\n"
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The deltas topic, as `yidu kafka topic` would make it on a single
	// broker: the kafka topic check passes (TestKafkaTopic fails it).
	brokers, topic := testenv.Topic(t, "yidu.reads", 1)
	kafka := map[string]string{"YIDU_KAFKA_BROKERS": strings.Join(brokers, ","), "YIDU_KAFKA_TOPIC": topic,
		"YIDU_KAFKA_REPLICATION_FACTOR": "1", "YIDU_KAFKA_MIN_INSYNC_REPLICAS": "1", "YIDU_KAFKA_PARTITIONS": "1"}
	tests := []struct {
		name      string
		agent     string
		publicURL string
		env       map[string]string
		fails     bool
		want      []string
	}{
		{name: "all set, app secret alone", agent: "1000002", publicURL: good, env: map[string]string{"YIDU_APP_HR_SECRET": "wide"},
			want: []string{"ok   kafka topic: " + topic + ": 1 partitions, replication factor 1, min.insync.replicas 1", "ok   callback secrets", "ok   gettoken (app secret)", "ok   agent/get (app secret): agent 1000002 is this secret's app; visible range: 1 departments",
				"ok   上报进入应用事件: isreportenter=1", "ok   OAuth2 trusted domain: redirect_domain yidu.example.com", "ok   getcallbackip", "ok   department/simplelist (app secret): 2 departments; the visible range holds the root",
				"ok   department/list", "ok   user/simplelist (app secret): department 1: 1 direct members, 1 with a name", "skip contacts-sync secret", "ok   callback URL",
				"warn trusted domain for tracked links (receiver.public_url): 127.0.0.1:"}},
		{name: "with the contacts-sync secret", agent: "1000002", publicURL: good, env: map[string]string{"YIDU_APP_HR_SECRET": "wide", "YIDU_APP_HR_CONTACTS_SECRET": "contacts"},
			want: []string{"ok   gettoken (contacts-sync secret)", "ok   user/list_id (contacts-sync secret): 2 member-department pairs"}},
		{name: "a narrow visible range", agent: "1000003", env: map[string]string{"YIDU_APP_HR_SECRET": "narrow"},
			want: []string{"warn department/simplelist (app secret): 1 departments, not the root: a partial directory", "warn department/list (app secret): no department names", "skip callback URL",
				"warn 上报进入应用事件: off", "warn OAuth2 trusted domain: none set"}},
		{name: "a wrong secret", agent: "1000002", env: map[string]string{"YIDU_APP_HR_SECRET": "wrong"}, fails: true,
			want: []string{"FAIL gettoken (app secret): errcode 40001", "the secret is wrong"}},
		{name: "the contacts secret where the app's belongs", agent: "1000002", env: map[string]string{"YIDU_APP_HR_SECRET": "contacts"}, fails: true,
			want: []string{"FAIL agent/get (app secret): errcode 48002", "this secret may not call this API"}},
		{name: "another app's secret", agent: "1000002", env: map[string]string{"YIDU_APP_HR_SECRET": "narrow"}, fails: true,
			want: []string{"FAIL agent/get (app secret): errcode 301002", "the access token belongs to another app"}},
		{name: "no app secret", agent: "1000002", fails: true, want: []string{"FAIL app secret: none (YIDU_APP_HR_SECRET)"}},
		{name: "a receiver with another token", agent: "1000002", publicURL: wrongToken, env: map[string]string{"YIDU_APP_HR_SECRET": "wide"}, fails: true,
			want: []string{"FAIL callback URL: " + wrongToken + "/wecom/callback/hr: answered 401"}},
		{name: "a receiver nobody listens on", agent: "1000002", publicURL: "http://127.0.0.1:1", env: map[string]string{"YIDU_APP_HR_SECRET": "wide"}, fails: true,
			want: []string{"FAIL callback URL: http://127.0.0.1:1/wecom/callback/hr: unreachable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := maps.Clone(kafka)
			maps.Copy(env, tt.env)
			out, _, err := runCmd(t, env, "", "doctor", "--app", "hr", "--config", config(t, tt.agent, tt.publicURL))
			if (err != nil) != tt.fails || exitCode(err) != map[bool]int{false: 0, true: 1}[tt.fails] {
				t.Errorf("doctor = %v (exit %d); want failure %v\n%s", err, exitCode(err), tt.fails, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, secret := range []string{"wide", "narrow", "contacts", "t0k", aesKey} {
				if strings.Contains(out, "="+secret) || strings.Contains(out, aesKey) {
					t.Errorf("output carries a secret (%s):\n%s", secret, out)
				}
			}
		})
	}
	// The dashboard's and the receiver's hosts against the trusted domain,
	// and the verification file at their root, as WeCom fetches it.
	verifyDir := t.TempDir()
	verifyPath := filepath.Join(verifyDir, "WW_verify_Dr0ctor.txt")
	if err := os.WriteFile(verifyPath, []byte("Dr0ctorToken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	serving := func(body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/WW_verify_Dr0ctor.txt" {
				_, _ = w.Write([]byte(body))
				return
			}
			http.NotFound(w, r)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	right, wrong := serving("Dr0ctorToken"), serving("something else")
	for _, tt := range []struct {
		name, dashboard string
		fails           bool
		want            []string
	}{
		{"dashboard on the trusted domain", "https://yidu.example.com", true, // the file is not served there
			[]string{"ok   trusted domain for sign-in with WeCom (dashboard.public_url): yidu.example.com is the trusted domain",
				"FAIL domain verification file: https://yidu.example.com/WW_verify_Dr0ctor.txt: unreachable"}},
		{"dashboard on another host", right, true,
			[]string{"FAIL trusted domain for sign-in with WeCom (dashboard.public_url): " + strings.TrimPrefix(right, "http://") + " is not the trusted domain yidu.example.com",
				"ok   domain verification file: " + right + "/WW_verify_Dr0ctor.txt serves it"}},
		{"another file served", wrong, true, []string{"FAIL domain verification file: " + wrong + "/WW_verify_Dr0ctor.txt: answers another content"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "yidu.yaml")
			text := "wecom: {api_base: \"" + api + "\", verify_file: " + verifyPath + "}\n" +
				"dashboard: {public_url: \"" + tt.dashboard + "\"}\n" +
				"apps:\n  - {name: hr, corp_id: " + corp + ", agent_id: 1000002, token: t0k, encoding_aes_key: " + aesKey + "}\n"
			if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			env := maps.Clone(kafka)
			env["YIDU_APP_HR_SECRET"] = "wide"
			out, _, err := runCmd(t, env, "", "doctor", "--app", "hr", "--config", p)
			if (err != nil) != tt.fails {
				t.Errorf("doctor = %v; want failure %v\n%s", err, tt.fails, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}

	if out, _, err := runCmd(t, nil, "", "doctor", "--config", config(t, "1", "")); exitCode(err) != 2 {
		t.Errorf("doctor without --app = %v (exit %d); want a usage error\n%s", err, exitCode(err), out)
	}
}

// TestDoctorSpool: doctor says where the spool is, how full it is, and
// warns when it is off or on tmpfs (gone with a reboot).
func TestDoctorSpool(t *testing.T) {
	disk := t.TempDir()
	if err := os.WriteFile(filepath.Join(disk, "00000000000000000001.spool"), make([]byte, 3000), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		dir    string
		status wecom.CheckStatus
		want   string
	}{
		{"off", config.SpoolOff, wecom.CheckWarn, "off: a read Kafka does not acknowledge is answered 503"},
		{"none", "", wecom.CheckWarn, "off:"},
		{"on disk, one segment", disk, wecom.CheckOK, disk + ": 3000 of 1048576 bytes used (1 segments, 0.3%)"},
		{"not created yet", filepath.Join(disk, "a", "b"), wecom.CheckOK, ": 0 of 1048576 bytes used (0 segments"},
	}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		tests = append(tests, struct {
			name   string
			dir    string
			status wecom.CheckStatus
			want   string
		}{"tmpfs", "/dev/shm/yidu-doctor-test", wecom.CheckWarn, "on tmpfs"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := spoolCheck(config.Receiver{SpoolDir: tt.dir, SpoolMaxBytes: 1 << 20})
			if c.Status != tt.status || !strings.Contains(c.Detail, tt.want) {
				t.Errorf("spoolCheck(%q) = %s %q; want %s containing %q", tt.dir, c.Status, c.Detail, tt.status, tt.want)
			}
		})
	}
}
