package deploycheck_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// loopName finds the name of each background loop's guard in yidu's
// code (internal/loop.New or Nop, and cmd/internal/process's helpers
// around it): the value of the yidu_loop_* series' loop label.
var loopName = regexp.MustCompile(`\b(?:loop\.New|loop\.Nop|loopGuard|guard)\("([a-z_]+)"`)

// TestLoopLabelsDocumented: the YiduLoopPanics row of docs/deploy.md
// names every loop label the code sets, and no other (it named a `seal`
// loop that does not exist and left out standing and receipts).
func TestLoopLabelsDocumented(t *testing.T) {
	loops := map[string]bool{}
	for _, m := range loopName.FindAllStringSubmatch(goLiterals(), -1) {
		loops[m[1]] = true
	}
	if len(loops) < 5 || !loops["rounds"] || !loops["flushd"] {
		t.Fatalf("found loops %v in the code: the pattern is blind", loops)
	}
	doc, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, l := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(l, "| `YiduLoopPanics`") {
			row = l
		}
	}
	if row == "" {
		t.Fatal("docs/deploy.md has no YiduLoopPanics row")
	}
	for name := range loops {
		if !strings.Contains(row, "`"+name+"`") {
			t.Errorf("docs/deploy.md's YiduLoopPanics row does not name the loop %s", name)
		}
	}
	named := regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(row[:strings.Index(row, "| the process")], -1)
	for _, m := range named {
		if m[1] != "loop" && !loops[m[1]] {
			t.Errorf("docs/deploy.md's YiduLoopPanics row names a loop %s the code does not have", m[1])
		}
	}
}
