package faulttest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// yiduBin is the production binary, built once by TestMain.
var yiduBin string

// TestMain builds cmd/yidu into a temporary directory: the scenarios run
// and kill it as real OS processes, so it must be the real binary, not Run
// called in-process.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "yidu-faulttest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faulttest:", err)
		os.Exit(1)
	}
	yiduBin = filepath.Join(dir, "yidu")
	build := exec.Command("go", "build", "-o", yiduBin, "github.com/yidu-io/yidu/cmd/yidu")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "faulttest: go build cmd/yidu:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	printReports()
	os.RemoveAll(dir)
	os.Exit(code)
}

// report is one scenario's line in docs/reliability.md.
type report struct {
	Scenario string
	// Reads is the number of distinct reads WeCom delivered; Tries the
	// HTTP attempts, Retries the attempts after the first.
	Reads, Tries, Retries int
	// OK is the reads answered 200; GaveUp those WeCom stopped retrying
	// after 3 non-200 answers.
	OK, GaveUp int
	// Lost is reads answered 200 missing from Redis or MySQL (or with
	// another read_time); Dupes rows counted twice in MySQL. Both must be 0.
	Lost, Dupes int
	// Landed is reads in MySQL after the repair; Repaired those of them
	// never answered 200 whose row reconcile wrote (read_time = repair time).
	Landed, Repaired int
	Elapsed          time.Duration
	Faults           string
}

var (
	reportsMu sync.Mutex
	reports   []report
)

func addReport(r report) {
	reportsMu.Lock()
	defer reportsMu.Unlock()
	reports = append(reports, r)
}

// printReports writes the results as the markdown table of
// docs/reliability.md.
func printReports() {
	reportsMu.Lock()
	defer reportsMu.Unlock()
	if len(reports) == 0 {
		return
	}
	sort.Slice(reports, func(i, j int) bool { return reports[i].Scenario < reports[j].Scenario })
	var b strings.Builder
	b.WriteString("\n| scenario | reads sent | tries | retries | 200s | gave up | lost | duplicates | in MySQL | repaired by reconcile | time | faults |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range reports {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %.1f s | %s |\n",
			r.Scenario, r.Reads, r.Tries, r.Retries, r.OK, r.GaveUp, r.Lost, r.Dupes, r.Landed, r.Repaired,
			r.Elapsed.Seconds(), r.Faults)
	}
	fmt.Print(b.String())
}
