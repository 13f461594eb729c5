package flushd

import (
	"fmt"
	"testing"
)

// FuzzStatementFor: any VERSION() answer picks a known form without
// panicking; TiDB always gets the CASE form; and a plain "X.Y.Z" compares
// as the numbers do.
func FuzzStatementFor(f *testing.F) {
	for _, v := range []string{"10.11.19-MariaDB-0+deb12u1", "5.5.5-10.5.9-MariaDB", "8.0.36", "8.0.11-TiDB-v7.5.1", "", "8.", ".1", "99999999999999999999.1"} {
		f.Add(v, uint16(8), uint16(0), uint16(4))
	}
	f.Fuzz(func(t *testing.T, version string, a, b, c uint16) {
		d := DialectOf(version)
		if st := StatementFor(d, version); st != StatementJSONTable && st != StatementCase {
			t.Fatalf("StatementFor(%q, %q) = %v", d, version, st)
		}
		if StatementFor(DialectTiDB, version) != StatementCase {
			t.Fatalf("StatementFor(tidb, %q) is not the CASE form", version)
		}
		v := fmt.Sprintf("%d.%d.%d", a, b, c)
		want := [3]int{int(a), int(b), int(c)}
		for _, ref := range [][3]int{{8, 0, 4}, {10, 6, 0}, {int(a), int(b), int(c)}} {
			less := want[0] < ref[0] || want[0] == ref[0] && (want[1] < ref[1] || want[1] == ref[1] && want[2] < ref[2])
			if got := versionBefore(v, ref[0], ref[1], ref[2]); got != less {
				t.Fatalf("versionBefore(%q, %v) = %v; want %v", v, ref, got, less)
			}
		}
	})
}
