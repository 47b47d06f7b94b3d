package testout

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/wrenchworks/wrench/task"
)

// Command returns the shell command, run at the repository root, that runs
// the tests of files with framework and prints output in FormatOf(framework):
//
//   - go: `go test -json -count=1` on the packages holding files (a file
//     under a testdata directory counts for the package above it), with
//     `-run` narrowed to the top-level tests of names when names are given;
//   - pytest: `python3 -m pytest -rA` on the test files among files (their
//     directories when none is a test module), with src/ on PYTHONPATH when
//     the repository has one (the src layout), whatever names says: pytest
//     cannot select parametrised node ids reliably, so the whole files run
//     and the caller picks the names out.
func Command(framework string, files, names []string) (string, error) {
	switch framework {
	case task.FrameworkGo:
		return goCommand(files, names)
	case task.FrameworkPytest:
		return pytestCommand(files)
	}
	return "", fmt.Errorf("testout: unknown test framework %q", framework)
}

func goCommand(files, names []string) (string, error) {
	pkgs := map[string]bool{}
	for _, f := range files {
		if dir, ok := goPackageOf(f); ok {
			pkgs[dir] = true
		}
	}
	if len(pkgs) == 0 {
		return "", errors.New("testout: no Go package among the test files")
	}
	var b strings.Builder
	b.WriteString("go test -json -count=1")
	if re := runPattern(names); re != "" {
		b.WriteString(" -run " + shellQuote(re))
	}
	for _, p := range sortedKeys(pkgs) {
		b.WriteString(" " + shellQuote("./"+p))
	}
	return b.String(), nil
}

// goPackageOf is the directory of the package a file belongs to: its own
// for a .go file, the one above the testdata directory for test data.
func goPackageOf(f string) (string, bool) {
	f = path.Clean(strings.TrimPrefix(f, "./"))
	parts := strings.Split(f, "/")
	for i, p := range parts[:len(parts)-1] {
		if p == "testdata" {
			return path.Join(append([]string{"."}, parts[:i]...)...), true
		}
	}
	if !strings.HasSuffix(f, ".go") {
		return "", false
	}
	return path.Dir(f), true
}

// runPattern is the -run pattern of the top-level tests of names.
func runPattern(names []string) string {
	top := map[string]bool{}
	for _, n := range names {
		t, _, _ := strings.Cut(n, "/")
		if t != "" {
			top[regexp.QuoteMeta(t)] = true
		}
	}
	if len(top) == 0 {
		return ""
	}
	return "^(" + strings.Join(sortedKeys(top), "|") + ")$"
}

func pytestCommand(files []string) (string, error) {
	mods, dirs := map[string]bool{}, map[string]bool{}
	for _, f := range files {
		f = path.Clean(strings.TrimPrefix(f, "./"))
		base := path.Base(f)
		switch {
		case strings.HasSuffix(base, ".py") && (strings.HasPrefix(base, "test_") || strings.HasSuffix(base, "_test.py") || base == "tests.py"):
			mods[f] = true
		default:
			dirs[path.Dir(f)] = true
		}
	}
	sel := mods
	if len(sel) == 0 {
		sel = dirs
	}
	if len(sel) == 0 {
		return "", errors.New("testout: no test files")
	}
	var b strings.Builder
	b.WriteString(`if [ -d src ]; then export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"; fi; `)
	b.WriteString("python3 -m pytest -rA -p no:cacheprovider --tb=short")
	for _, f := range sortedKeys(sel) {
		b.WriteString(" " + shellQuote(f))
	}
	return b.String(), nil
}

// shellQuote quotes s for bash as one word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
