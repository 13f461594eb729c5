//go:build ignore

// Command mutate is the curated mutation check of .ci/run: for every
// mutant of .ci/mutants.txt it builds the package with one line of the
// read path broken and runs the test that must catch it. A mutant whose
// test passes survived: the promise it breaks is unguarded, and mutate
// fails. The working tree is never modified: each mutated file is written
// to a temporary directory and handed to the go command with -overlay.
//
//	go run .ci/mutate.go [-only REGEX] [-budget 6m] [.ci/mutants.txt]
//
// mutants.txt has one mutant per line, five TAB-separated fields:
//
//	package  test-regex  file  original  replacement
//
// original must occur exactly once in file (a stale mutant is an error,
// not a pass); in original and replacement \n is a newline, \t a tab and
// \\ a backslash. The "# " comment line right above a mutant names it.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

type mutant struct {
	line              int
	name              string
	pkg, run, file    string
	original, replace string
}

func main() {
	only := flag.String("only", "", "run only the mutants whose name or file matches this regexp")
	budget := flag.Duration("budget", 8*time.Minute, "fail when the whole run takes longer")
	perMutant := flag.Duration("timeout", 3*time.Minute, "go test -timeout for one mutant")
	flag.Parse()
	list := ".ci/mutants.txt"
	if flag.NArg() > 0 {
		list = flag.Arg(0)
	}
	if err := run(list, *only, *budget, *perMutant); err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(1)
	}
}

func run(list, only string, budget, perMutant time.Duration) error {
	ms, err := parse(list)
	if err != nil {
		return err
	}
	var filter *regexp.Regexp
	if only != "" {
		if filter, err = regexp.Compile(only); err != nil {
			return fmt.Errorf("-only: %w", err)
		}
	}
	tmp, err := os.MkdirTemp("", "yidu-mutate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	start := time.Now()
	var ran, killed int
	var bad []string
	for i, m := range ms {
		if filter != nil && !filter.MatchString(m.name) && !filter.MatchString(m.file) {
			continue
		}
		ran++
		t0 := time.Now()
		status, out := try(ctx, tmp, i, m, perMutant)
		fmt.Printf("%-8s %5.1fs  %s:%d %s (%s -run %s)\n", status, time.Since(t0).Seconds(), list, m.line, m.name, m.pkg, m.run)
		if status == "killed" {
			killed++
			continue
		}
		bad = append(bad, fmt.Sprintf("%s: %s", status, m.name))
		if out != "" {
			fmt.Printf("---- output of %s\n%s\n----\n", m.name, tail(out, 40))
		}
	}
	fmt.Printf("mutation score: %d/%d killed in %s\n", killed, ran, time.Since(start).Round(time.Second))
	if ran == 0 {
		return errors.New("no mutant ran")
	}
	if len(bad) > 0 {
		return fmt.Errorf("%d of %d mutants not killed:\n  %s", len(bad), ran, strings.Join(bad, "\n  "))
	}
	return nil
}

// try applies m in an overlay and runs its test: "killed" when the test
// fails, "SURVIVED" when it passes, "STALE" when the original is not in
// the file exactly once, "BROKEN" when the mutant does not build, "NOTEST"
// when the regexp matches no test, "BUDGET" when the run's time is up.
func try(ctx context.Context, tmp string, i int, m mutant, timeout time.Duration) (status, out string) {
	src, err := os.ReadFile(m.file)
	if err != nil {
		return "STALE", err.Error()
	}
	if n := bytes.Count(src, []byte(m.original)); n != 1 {
		return "STALE", fmt.Sprintf("%q occurs %d times in %s; want exactly once", m.original, n, m.file)
	}
	mutated := bytes.Replace(src, []byte(m.original), []byte(m.replace), 1)
	abs, err := filepath.Abs(m.file)
	if err != nil {
		return "STALE", err.Error()
	}
	dst := filepath.Join(tmp, fmt.Sprintf("%02d-%s", i, filepath.Base(m.file)))
	overlay := filepath.Join(tmp, fmt.Sprintf("%02d-overlay.json", i))
	js, _ := json.Marshal(map[string]map[string]string{"Replace": {abs: dst}})
	if err := os.WriteFile(dst, mutated, 0o644); err != nil {
		return "BROKEN", err.Error()
	}
	if err := os.WriteFile(overlay, js, 0o644); err != nil {
		return "BROKEN", err.Error()
	}
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-vet=off", "-overlay", overlay,
		"-timeout", timeout.String(), "-run", m.run, m.pkg)
	cmd.WaitDelay = 10 * time.Second
	b, err := cmd.CombinedOutput()
	out = string(b)
	switch {
	case ctx.Err() != nil:
		return "BUDGET", out
	case err == nil && strings.Contains(out, "no tests to run"):
		return "NOTEST", out
	case err == nil:
		return "SURVIVED", out
	case strings.Contains(out, "[build failed]") || strings.Contains(out, "[setup failed]") || strings.Contains(out, "vet:"):
		return "BROKEN", out
	case strings.Contains(out, "--- FAIL") || strings.Contains(out, "panic:"):
		return "killed", ""
	}
	return "BROKEN", out // failed without a failing test: not a kill
}

func parse(path string) ([]mutant, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ms []mutant
	name := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			name = ""
			continue
		case strings.HasPrefix(line, "#"):
			name = strings.TrimSpace(strings.TrimPrefix(line, "#"))
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 5 {
			return nil, fmt.Errorf("%s:%d: %d TAB-separated fields; want 5 (package, test regexp, file, original, replacement)", path, n, len(f))
		}
		if _, err := regexp.Compile(f[1]); err != nil {
			return nil, fmt.Errorf("%s:%d: test regexp: %w", path, n, err)
		}
		m := mutant{line: n, name: name, pkg: f[0], run: f[1], file: f[2], original: unescape(f[3]), replace: unescape(f[4])}
		if m.name == "" {
			m.name = m.file
		}
		if m.original == m.replace {
			return nil, fmt.Errorf("%s:%d: replacement equals the original", path, n)
		}
		ms = append(ms, m)
		name = ""
	}
	return ms, sc.Err()
}

func unescape(s string) string {
	return strings.NewReplacer(`\\`, `\`, `\n`, "\n", `\t`, "\t").Replace(s)
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}
