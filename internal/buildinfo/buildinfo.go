// Package buildinfo says what a yidu binary is: the module version, the
// VCS revision and time it was built from, and the Go version, all read
// from the build information the Go toolchain embeds (runtime/debug), so
// nothing has to be stamped by hand. `go build` in a git checkout records
// the revision (-buildvcs, on by default); the Dockerfile, which builds
// without .git, passes them in through the ldflags variables below.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set with -ldflags "-X github.com/yidu-io/yidu/internal/buildinfo.version=…"
// where the build has no VCS information (a Docker build context without
// .git); the embedded build information wins when it has them.
var (
	version  string
	revision string
	time     string
)

// Info describes a build.
type Info struct {
	// Version is the main module's version ("v1.2.3", a pseudo-version,
	// or "(devel)" for a build from a work tree).
	Version string
	// Revision is the VCS commit, Time its commit time (RFC 3339), and
	// Modified whether the work tree had uncommitted changes.
	Revision string
	Time     string
	Modified bool
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// Read returns the running binary's build information.
func Read() Info {
	in := Info{Version: "(devel)", GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" {
			in.Version = v
		}
		in.GoVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Revision = s.Value
			case "vcs.time":
				in.Time = s.Value
			case "vcs.modified":
				in.Modified = s.Value == "true"
			}
		}
	}
	if version != "" && (in.Version == "" || in.Version == "(devel)") {
		in.Version = version
	}
	if in.Revision == "" {
		in.Revision = revision
	}
	if in.Time == "" {
		in.Time = time
	}
	return in
}

// String is the one line `yidu version` prints.
func (in Info) String() string {
	rev := in.Revision
	if rev == "" {
		rev = "unknown"
	}
	if in.Modified {
		rev += "+dirty"
	}
	at := in.Time
	if at == "" {
		at = "unknown"
	}
	return fmt.Sprintf("yidu %s (revision %s, %s) %s", in.Version, rev, at, in.GoVersion)
}
