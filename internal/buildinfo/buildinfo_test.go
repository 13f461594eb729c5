package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	in := Read()
	if in.GoVersion != runtime.Version() {
		t.Errorf("GoVersion = %q; want %q", in.GoVersion, runtime.Version())
	}
	if in.Version == "" {
		t.Errorf("Version is empty; want a version or (devel)")
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		name string
		in   Info
		want string
	}{
		{"stamped", Info{Version: "v1.2.3", Revision: "abc123", Time: "2026-01-02T03:04:05Z", GoVersion: "go1.26.0"},
			"yidu v1.2.3 (revision abc123, 2026-01-02T03:04:05Z) go1.26.0"},
		{"dirty", Info{Version: "(devel)", Revision: "abc", Modified: true, GoVersion: "go1.26.0"},
			"yidu (devel) (revision abc+dirty, unknown) go1.26.0"},
		{"nothing", Info{Version: "(devel)", GoVersion: "go1.26.0"}, "yidu (devel) (revision unknown, unknown) go1.26.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.String(); got != tt.want {
				t.Errorf("String() = %q; want %q", got, tt.want)
			}
		})
	}
}

func TestLdflagsFillGaps(t *testing.T) {
	defer func(v, r, tm string) { version, revision, time = v, r, tm }(version, revision, time)
	version, revision, time = "v9.9.9", "feedface", "2026-12-01T00:00:00Z"
	in := Read()
	// Test binaries carry no VCS settings, so the stamped values show.
	if in.Revision != "feedface" || !strings.HasPrefix(in.Time, "2026-12-01") {
		t.Errorf("Read() = %+v; want the ldflags revision and time", in)
	}
}
