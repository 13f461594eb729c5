// Package scopetest holds the attacker's table of issue 31 on real
// services: the dashboard built from the real tracker.Registry,
// bitmap.Store and idmap.Mapper on MariaDB and Redis, its directory
// synced from internal/fakewecom through the real wecom client (which
// silenceper's process-wide URI modifier points at the fake, hence a
// package and a TestMain of its own), access over the Mapper, Redis
// sessions, and a department leader signed in through the fake WeCom's
// OAuth pages.
//
// The package is tests only; run it with
//
//	YIDU_TEST_REAL=1 go test -count=1 ./dashboard/scopetest/
package scopetest
