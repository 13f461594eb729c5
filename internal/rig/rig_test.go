package rig

import (
	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu/callback/wxcrypt"
)

// millis returns n latencies, 1 ms to n ms, ascending.
func millis(tb testing.TB, n int) []time.Duration {
	tb.Helper()
	d := make([]time.Duration, n)
	for i := range d {
		d[i] = time.Duration(i+1) * time.Millisecond
	}
	return d
}

func TestPercentile(t *testing.T) {
	lat := millis(t, 1000)
	tests := []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"median", lat, 0.5, 500 * time.Millisecond},
		{"p99", lat, 0.99, 990 * time.Millisecond},
		{"p999", lat, 0.999, 999 * time.Millisecond},
		{"max", lat, 1, 1000 * time.Millisecond},
		{"min", lat, 0, time.Millisecond},
		{"one sample", millis(t, 1), 0.99, time.Millisecond},
		{"p99 of 100 is the 99th", millis(t, 100), 0.99, 99 * time.Millisecond},
		{"none", nil, 0.5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.sorted, tt.q); got != tt.want {
				t.Errorf("Percentile(%d samples, %v) = %v; want %v", len(tt.sorted), tt.q, got, tt.want)
			}
		})
	}
}

func TestUserIDs(t *testing.T) {
	tests := []struct {
		ids  UserIDs
		i    int
		want string
	}{
		{UserIDs{Prefix: "u", Digits: 7}, 42, "u0000042"},
		{UserIDs{Prefix: "s", Digits: 6}, 0, "s000000"},
		{UserIDs{Prefix: "s", Digits: 6}, 1_234_567, "s1234567"},
		{UserIDs{Prefix: "user-", Digits: 4}, 7, "user-0007"},
	}
	for _, tt := range tests {
		got := tt.ids.ID(tt.i)
		if got != tt.want {
			t.Errorf("%+v.ID(%d) = %q; want %q", tt.ids, tt.i, got, tt.want)
		}
		if i, ok := tt.ids.Index(got); i != tt.i || !ok {
			t.Errorf("%+v.Index(%q) = %d, %v; want %d, true", tt.ids, got, i, ok, tt.i)
		}
	}
	s := UserIDs{Prefix: "s", Digits: 6}
	for _, id := range []string{"", "s", "u000001", "s-1", "sabc", "user-0001"} {
		if i, ok := s.Index(id); ok {
			t.Errorf("%+v.Index(%q) = %d, true; want refused", s, id, i)
		}
	}
}

func TestRandomHex(t *testing.T) {
	a, b := RandomHex(6), RandomHex(6)
	if len(a) != 12 || a == b {
		t.Errorf("RandomHex(6) = %q, %q; want 12 hex digits, different each time", a, b)
	}
	if _, err := hex.DecodeString(a); err != nil {
		t.Errorf("RandomHex(6) = %q: %v", a, err)
	}
}

func TestLogf(t *testing.T) {
	var b bytes.Buffer
	Logf(&b, "built %s in %d ms", "yidu", 12)
	if !regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3} built yidu in 12 ms\n$`).MatchString(b.String()) {
		t.Errorf("Logf wrote %q; want the time and the line", b.String())
	}
	Logf(nil, "nowhere") // must not panic
}

func TestLoadAvg(t *testing.T) {
	if _, err := os.Stat("/proc/loadavg"); err != nil {
		t.Skip("no /proc/loadavg")
	}
	l := LoadAvg()
	for i, v := range l {
		if v < 0 {
			t.Errorf("LoadAvg()[%d] = %v; want ≥ 0", i, v)
		}
	}
}

func TestStatusKB(t *testing.T) {
	tests := []struct {
		field  string
		wantOK bool
	}{
		{"VmRSS", true},
		{"VmHWM", true},
		{"VmNoSuch", false},
	}
	for _, tt := range tests {
		kb, err := StatusKB(os.Getpid(), tt.field)
		if tt.wantOK && (err != nil || kb <= 0) {
			t.Errorf("StatusKB(self, %s) = %d, %v; want > 0", tt.field, kb, err)
		}
		if !tt.wantOK && err == nil {
			t.Errorf("StatusKB(self, %s) = %d, nil; want an error", tt.field, kb)
		}
	}
}

// TestApp: the app signs and encrypts as WeCom's test vector does.
func TestApp(t *testing.T) {
	a := App()
	if _, err := wxcrypt.New(a.Token, a.EncodingAESKey, a.CorpID); err != nil {
		t.Errorf("wxcrypt.New(App()) = %v", err)
	}
}

func TestCommand(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    Command
		wantErr string
	}{
		{"defaults", nil, Command{Servers: Servers{MySQLDSN: "root@tcp(127.0.0.1:3306)/", RedisAddr: "127.0.0.1:6379"}, Timeout: time.Minute}, ""},
		{"every shared flag", []string{"-mysql", "u@tcp(db:3306)/", "-redis", "r:1", "-kfake-bin", "/k", "-timeout", "2s", "-v"},
			Command{Servers: Servers{MySQLDSN: "u@tcp(db:3306)/", RedisAddr: "r:1"}, KfakeBin: "/k", Timeout: 2 * time.Second, Verbose: true}, ""},
		{"positional argument", []string{"-v", "extra"}, Command{}, `unexpected arguments ["extra"]`},
		{"unknown flag", []string{"-nope"}, Command{}, "flag provided but not defined: -nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			c := NewCommand("yidu-bench", &stderr, time.Minute, "bound", "verbose")
			own := c.FlagSet.Int("own", 0, "a command's own flag")
			err := c.Parse(tt.args)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Parse(%q) = %v; want %q", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q) = %v", tt.args, err)
			}
			got := *c
			got.FlagSet = nil
			if got != tt.want || *own != 0 {
				t.Errorf("Parse(%q) = %+v; want %+v", tt.args, got, tt.want)
			}
		})
	}
	var stderr bytes.Buffer
	c := NewCommand("yidu-soak", &stderr, 0, "bound", "verbose")
	if err := c.Parse([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("Parse(-h) = %v; want flag.ErrHelp", err)
	}
	if !strings.Contains(stderr.String(), "the soak creates and drops its own database") {
		t.Errorf("usage names another run:\n%s", stderr.String())
	}
}
