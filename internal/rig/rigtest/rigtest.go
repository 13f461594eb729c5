// Package rigtest gives the tests of the benchmark and the soak the real
// servers they run against, as rig.Servers. Test code only: it imports
// testing (through testenv), which package rig does not.
package rigtest

import (
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/yidu-io/yidu/internal/rig"
	"github.com/yidu-io/yidu/internal/testenv"
)

// Servers returns testenv's MariaDB server (the DSN without a database:
// the run makes its own) and Redis for a test of a whole run. Without them
// the test is skipped, or fails with YIDU_TEST_REAL=1; with -short it is
// skipped, as a run builds and starts processes for seconds to minutes.
func Servers(tb testing.TB) rig.Servers {
	tb.Helper()
	if testing.Short() {
		tb.Skip("a whole run: builds and starts processes against the real servers")
	}
	c, err := mysql.ParseDSN(testenv.MySQLDSN(tb))
	testenv.Check(tb, "parse dsn", err)
	c.DBName = ""
	return rig.Servers{MySQLDSN: c.FormatDSN(), RedisAddr: testenv.RedisAddr(tb)}
}
