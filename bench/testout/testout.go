// Package testout reads test runners' output into per-test outcomes and
// builds the commands that run a named subset of a repository's tests:
// `go test` (-json or -v output) and pytest (-rA summary or JUnit XML).
//
// Test names follow the conventions SWE-bench-style instances use: a Go
// test is its name as `go test -run` sees it ("TestParse",
// "TestParse/empty_input"), without the package; a pytest test is its node
// id ("tests/test_signer.py::TestSigner::test_sign[sha1]").
//
// The package is pure: it runs nothing and imports nothing of Wrench but
// the task types.
package testout

import (
	"fmt"
	"sort"

	"github.com/wrenchworks/wrench/task"
)

// Format names an output format Parse reads.
type Format string

// The output formats.
const (
	GoJSON    Format = "go-json"   // go test -json
	GoVerbose Format = "go-v"      // go test -v
	PytestRA  Format = "pytest-ra" // pytest -rA (the short test summary)
	JUnitXML  Format = "junit-xml" // JUnit XML (pytest --junitxml, go-junit-report)
)

// Outcomes maps a test name to its status.
type Outcomes map[string]task.TestStatus

// Parse reads output in format f. Unrecognised lines are ignored: a test
// that never reported is simply absent (task.TestMissing to a caller that
// asks for it).
func Parse(f Format, output []byte) (Outcomes, error) {
	switch f {
	case GoJSON:
		return parseGoJSON(output), nil
	case GoVerbose:
		return parseGoVerbose(output), nil
	case PytestRA:
		return parsePytestRA(output), nil
	case JUnitXML:
		return parseJUnit(output)
	}
	return nil, fmt.Errorf("testout: unknown format %q", f)
}

// FormatOf is the format a framework's Command writes.
func FormatOf(framework string) (Format, error) {
	switch framework {
	case task.FrameworkGo:
		return GoJSON, nil
	case task.FrameworkPytest:
		return PytestRA, nil
	}
	return "", fmt.Errorf("testout: unknown test framework %q", framework)
}

// Lookup returns the outcome of each name, in order; a name the run did
// not report is task.TestMissing.
func (o Outcomes) Lookup(names []string) []task.TestOutcome {
	out := make([]task.TestOutcome, len(names))
	for i, n := range names {
		st, ok := o[n]
		if !ok {
			st = task.TestMissing
		}
		out[i] = task.TestOutcome{Name: n, Status: st}
	}
	return out
}

// List returns every outcome sorted by name.
func (o Outcomes) List() []task.TestOutcome {
	out := make([]task.TestOutcome, 0, len(o))
	for n, st := range o {
		out = append(out, task.TestOutcome{Name: n, Status: st})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// set records st for name; when a name reports twice (the same test name
// in two packages, a rerun) the worse outcome wins.
func (o Outcomes) set(name string, st task.TestStatus) {
	if prev, ok := o[name]; ok && rank(prev) >= rank(st) {
		return
	}
	o[name] = st
}

func rank(s task.TestStatus) int {
	switch s {
	case task.TestPassed:
		return 1
	case task.TestSkipped:
		return 2
	case task.TestFailed:
		return 3
	case task.TestError:
		return 4
	}
	return 0
}
