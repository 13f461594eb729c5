package handle

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/yidu-io/yidu/progress"
)

// Fuzz targets of the parsers of outside input. Seeds are inline; run
// e.g. go test -fuzz FuzzParseCursor ./dashboard/internal/handle to explore.

func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"", "0", "1", "4294967295", "4294967296", "-1", "+1", "007", "1e3", " 1", "１"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		uid, ok, err := ParseCursor(s)
		if err != nil {
			return
		}
		if ok != (s != "") {
			t.Fatalf("ParseCursor(%q) ok = %v", s, ok)
		}
		if ok {
			back, ok2, err := ParseCursor(strconv.FormatUint(uint64(uid), 10))
			if err != nil || !ok2 || back != uid {
				t.Fatalf("cursor %d does not round-trip", uid)
			}
		}
	})
}

func FuzzParseState(f *testing.F) {
	for _, s := range []string{"", "all", "read", "unread", "READ", "unread ", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		st, err := ParseState(s)
		if err != nil {
			return
		}
		if st != progress.StateAll && st != progress.StateRead && st != progress.StateUnread {
			t.Fatalf("ParseState(%q) = %q", s, st)
		}
	})
}

func FuzzParseLimit(f *testing.F) {
	for _, s := range []string{"", "1", "1000", "1001", "0", "-5", "99999999999999999999", "1.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseLimit(s)
		if err == nil && (n < 1 || n > MaxLimit) {
			t.Fatalf("ParseLimit(%q) = %d", s, n)
		}
	})
}

func FuzzParseDepartment(f *testing.F) {
	for _, s := range []string{"", "1", "0", "-1", "9223372036854775807", "9223372036854775808", "+2", "2 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, ok, err := ParseDepartment(s)
		if err != nil {
			return
		}
		if ok && id < 1 || ok != (s != "") {
			t.Fatalf("ParseDepartment(%q) = %d, %v", s, id, ok)
		}
	})
}

func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"", "ALICE", " 张三 ", "\xff", strings.Repeat("é", 65), "İ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQuery(s)
		if err != nil {
			return
		}
		if !utf8.ValidString(q) || utf8.RuneCountInString(q) > 3*maxQueryRunes {
			t.Fatalf("ParseQuery(%q) = %q", s, q)
		}
		if strings.ToLower(q) != q {
			t.Fatalf("ParseQuery(%q) = %q is not lower-case", s, q)
		}
	})
}
