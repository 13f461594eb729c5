// Package faulttest holds yidu's fault tests: the real yidu binary runs as
// OS processes (receiver, flushd, dashboard, reconcile) against the real
// MariaDB and Redis and an in-process kfake cluster, a player acts as WeCom
// (signed template_card_event callbacks, up to 3 tries on non-200), and the
// tests kill processes and cut dependencies while it plays. Each test ends
// by checking the invariant of docs/architecture.md: every read answered
// 200 is in Redis and in MySQL with read_time equal to the callback's
// CreateTime, Redis and MySQL hold the same reads, and nothing is counted
// twice. docs/reliability.md lists the scenarios and their results.
//
// The package has no non-test code; run it with
//
//	go test -count=1 -v ./internal/faulttest/
package faulttest
