package github

import (
	"sort"

	"github.com/wrenchworks/wrench/bench/testout"
	"github.com/wrenchworks/wrench/task"
)

// testDiff is what changed between the test runs before and after: the
// tests that failed before and pass now, and those that newly fail. Known
// is false when neither run's output names tests in a format Wrench reads
// (go test -v or -json, pytest -rA, JUnit XML); only the exit codes tell
// then.
type testDiff struct {
	Fixed, Broken []string
	Known         bool
}

// diffTests reads the outputs of the runs before and after the change.
// Outputs are tails: a test whose line was cut is not named.
func diffTests(before, after *task.TestRun) testDiff {
	if before == nil || after == nil {
		return testDiff{}
	}
	b, a := outcomes(before.Output), outcomes(after.Output)
	if len(b) == 0 && len(a) == 0 {
		return testDiff{}
	}
	failing := func(o testout.Outcomes, name string) bool {
		st := o[name]
		return st == task.TestFailed || st == task.TestError
	}
	var d testDiff
	d.Known = true
	for name := range b {
		if failing(b, name) && !failing(a, name) && (after.Passed || a[name] == task.TestPassed) {
			d.Fixed = append(d.Fixed, name)
		}
	}
	for name := range a {
		if failing(a, name) && !failing(b, name) {
			d.Broken = append(d.Broken, name)
		}
	}
	sort.Strings(d.Fixed)
	sort.Strings(d.Broken)
	return d
}

// outcomes parses output in whichever known format names the most tests.
func outcomes(output string) testout.Outcomes {
	var best testout.Outcomes
	for _, f := range []testout.Format{testout.GoJSON, testout.GoVerbose, testout.PytestRA} {
		o, err := testout.Parse(f, []byte(output))
		if err == nil && len(o) > len(best) {
			best = o
		}
	}
	return best
}
