package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
)

// readmeCommands returns the `./yidu …` lines of the README's code blocks
// (and the stdin a pipeline feeds them), as a newcomer would type them.
func readmeCommands(t *testing.T) (cmds [][]string, stdins []string) {
	t.Helper()
	f, err := os.Open("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "```") {
			in = !in
			continue
		}
		if !in {
			continue
		}
		if i := strings.Index(line, " #"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		stdin := ""
		if pre, post, ok := strings.Cut(line, "| ./yidu "); ok {
			pre = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(pre), "echo"))
			stdin = strings.Trim(pre, `'"`) + "\n"
			line = "./yidu " + post
		}
		if !strings.HasPrefix(line, "./yidu ") {
			continue
		}
		args := strings.Fields(strings.TrimPrefix(line, "./yidu "))
		for i, a := range args {
			if strings.HasPrefix(a, "deploy/") {
				args[i] = "../../" + a
			}
		}
		cmds = append(cmds, args)
		stdins = append(stdins, stdin)
	}
	return cmds, stdins
}

// TestREADMECommands runs every `./yidu` command of the README, in order,
// against the real MariaDB and Redis, kfake and a fake WeCom: the example
// configuration with the environment overrides an operator would set.
func TestREADMECommands(t *testing.T) {
	cmds, stdins := readmeCommands(t)
	if len(cmds) < 6 {
		t.Fatalf("found %d ./yidu commands in README.md; want at least 6", len(cmds))
	}
	_, prefix := testenv.Redis(t)
	// A Kafka with no deltas topic yet: the README's `yidu kafka topic`
	// creates it (one copy: the test's Kafka has one broker).
	brokers := testenv.KafkaBrokers(t)
	wecom := fakewecom.Start(t, fakewecom.New(fakewecom.Corp{
		CorpID: "ww1234567890abcdef", Apps: []fakewecom.App{{AgentID: 1000002, Secret: "hr-secret"}},
		Departments: []fakewecom.Department{{ID: 1, Name: "总部"}},
		Users:       []fakewecom.User{{UserID: "zhangsan", Name: "张三", Departments: []int{1}}},
	}))
	// The example names database yidu and real addresses; the test's own
	// database, Redis namespace, kfake and fake WeCom stand in for them.
	env := map[string]string{
		"YIDU_MYSQL_DSN":                 testenv.MySQLDSN(t),
		"YIDU_REDIS_ADDR":                testenv.RedisAddr(t),
		"YIDU_REDIS_PREFIX":              prefix,
		"YIDU_KAFKA_BROKERS":             strings.Join(brokers, ","),
		"YIDU_KAFKA_TOPIC":               testenv.RandomName("yidu.reads."),
		"YIDU_KAFKA_GROUP":               testenv.RandomName("yidu-flushd-"),
		"YIDU_KAFKA_PARTITIONS":          "2",
		"YIDU_KAFKA_REPLICATION_FACTOR":  "1",
		"YIDU_KAFKA_MIN_INSYNC_REPLICAS": "1",
		"YIDU_RECEIVER_LISTEN":           "127.0.0.1:0",
		"YIDU_DASHBOARD_LISTEN":          "127.0.0.1:0",
		"YIDU_FLUSHD_LISTEN":             "127.0.0.1:0",
		"YIDU_WECOM_API_BASE":            wecom,
		"YIDU_APP_HR_SECRET":             "hr-secret",
	}
	for i, args := range cmds {
		t.Run(strings.Join(args[:min(2, len(args))], " "), func(t *testing.T) {
			switch args[0] {
			case "serve", "receiver", "flushd", "dashboard":
				runUntilStopped(t, env, args)
				return
			}
			out, errOut, err := runCmd(t, env, stdins[i], args...)
			if err != nil {
				t.Fatalf("yidu %s: %v\n%s", strings.Join(args, " "), err, errOut)
			}
			if strings.TrimSpace(out) == "" {
				t.Errorf("yidu %s printed nothing", strings.Join(args, " "))
			}
			t.Logf("yidu %s:\n%s", strings.Join(args, " "), out)
		})
	}
}

// runUntilStopped starts a long-running command, waits until every role it
// runs says it is up, then cancels it as SIGTERM does and expects a clean
// exit.
func runUntilStopped(t *testing.T, env map[string]string, args []string) {
	t.Helper()
	want := map[string][]string{
		"serve":     {"receiver listening", "dashboard listening", "flushd consuming"},
		"receiver":  {"receiver listening"},
		"dashboard": {"dashboard listening"},
		"flushd":    {"flushd consuming"},
	}[args[0]]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr testenv.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, args, strings.NewReader(""), &bytes.Buffer{}, &stderr, func(k string) string { return env[k] })
	}()
	deadline := time.After(30 * time.Second)
	for up := false; !up; {
		select {
		case err := <-done:
			t.Fatalf("yidu %s exited early: %v\n%s", strings.Join(args, " "), err, stderr.String())
		case <-deadline:
			t.Fatalf("yidu %s did not come up in 30 s:\n%s", strings.Join(args, " "), stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		up = true
		for _, w := range want {
			up = up && strings.Contains(stderr.String(), w)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("yidu %s stopped with %v; want a clean exit", strings.Join(args, " "), err)
		}
	case <-time.After(40 * time.Second):
		t.Fatalf("yidu %s did not stop within 40 s of SIGTERM", strings.Join(args, " "))
	}
}
