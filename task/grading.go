package task

import (
	"fmt"
	"strings"
	"time"
)

// Grading is a task's hidden grading spec: what the worker checks after the
// agent has finished, SWE-bench style. It never reaches the agent, its
// instruction, its trajectory or its events, and nothing of it is in the
// sandbox before the agent finishes: the worker applies TestPatch and runs
// the tests only once the agent's patch has been taken.
type Grading struct {
	// Run, Instance and Model label a benchmark task in results and
	// metrics: the bench run, the instance id and the model the run is
	// reported under ("gold", "empty", or a model name).
	Run      string `json:"run,omitempty"`
	Instance string `json:"instance,omitempty"`
	Model    string `json:"model,omitempty"`
	// TestPatch is a unified diff of test files, applied after the agent's
	// changes (the files it touches are first restored to the base commit).
	TestPatch string `json:"test_patch"`
	// FailToPass are the tests the fix must make pass; PassToPass the tests
	// that must keep passing.
	FailToPass []string `json:"fail_to_pass,omitempty"`
	PassToPass []string `json:"pass_to_pass,omitempty"`
	// Tests say how to run the tests.
	Tests TestSelection `json:"tests"`
	// Discover records the outcome of every test the selection runs instead
	// of judging the two lists (mining uses it to find them).
	Discover bool `json:"discover,omitempty"`
}

// TestSelection says how to run a named subset of a repository's tests.
type TestSelection struct {
	// Framework is GoTest or Pytest.
	Framework string `json:"framework"`
	// Files are the test files to run (paths relative to the repository
	// root): Go runs their packages, pytest the files.
	Files []string `json:"files"`
	// Timeout bounds the test run; 0 means the worker's test timeout.
	Timeout Duration `json:"timeout,omitempty"`
}

// The test frameworks grading knows how to run and read.
const (
	FrameworkGo     = "go"     // go test -json
	FrameworkPytest = "pytest" // python3 -m pytest -rA
)

// Limits of a grading spec: the test patch is bounded like any input.
const (
	MaxTestPatchBytes = 1 << 20
	MaxGradingTests   = 20000
)

// validate reports what is wrong with g, for Task.Validate.
func (g *Grading) validate(add func(field, format string, args ...any)) {
	switch g.Tests.Framework {
	case FrameworkGo, FrameworkPytest:
	default:
		add("grading.tests.framework", "%q is not one of %s, %s", g.Tests.Framework, FrameworkGo, FrameworkPytest)
	}
	if len(g.Tests.Files) == 0 {
		add("grading.tests.files", "is required")
	}
	if len(g.TestPatch) > MaxTestPatchBytes {
		add("grading.test_patch", "is %d bytes; the limit is %d", len(g.TestPatch), MaxTestPatchBytes)
	}
	if n := len(g.FailToPass) + len(g.PassToPass); n > MaxGradingTests {
		add("grading", "names %d tests; the limit is %d", n, MaxGradingTests)
	}
	if !g.Discover && len(g.FailToPass) == 0 {
		add("grading.fail_to_pass", "is required unless discover is set")
	}
	if d := time.Duration(g.Tests.Timeout); d < 0 || d > MaxTimeout {
		add("grading.tests.timeout", "must be between 0 and %s", MaxTimeout)
	}
}

// Hidden returns t without its grading spec: what the agent may see.
func (t Task) Hidden() Task {
	t.Grading = nil
	return t
}

// TestStatus is the outcome of one test.
type TestStatus string

// The outcomes of a test. Missing means the test did not report at all
// (it does not exist, or its package did not build).
const (
	TestPassed  TestStatus = "passed"
	TestFailed  TestStatus = "failed"
	TestSkipped TestStatus = "skipped"
	TestError   TestStatus = "error"
	TestMissing TestStatus = "missing"
)

// TestOutcome is one test's outcome.
type TestOutcome struct {
	Name   string     `json:"name"`
	Status TestStatus `json:"status"`
}

// Grade is what grading found, recorded in the Result.
type Grade struct {
	// Run, Instance and Model are copied from the spec.
	Run      string `json:"run,omitempty"`
	Instance string `json:"instance,omitempty"`
	Model    string `json:"model,omitempty"`
	// Resolved is true when every FailToPass and PassToPass test passed.
	Resolved bool `json:"resolved"`
	// Error says why grading could not judge the work (the test patch did
	// not apply, the test command could not run): the infrastructure's
	// fault, not the model's.
	Error string `json:"error,omitempty"`
	// FailToPass and PassToPass are the outcomes of the spec's lists, in
	// its order.
	FailToPass []TestOutcome `json:"fail_to_pass,omitempty"`
	PassToPass []TestOutcome `json:"pass_to_pass,omitempty"`
	// Tests are every outcome the run reported (Discover only).
	Tests []TestOutcome `json:"tests,omitempty"`
	// Command is the test command that ran; ExitCode its exit code.
	Command  string        `json:"command,omitempty"`
	ExitCode int           `json:"exit_code"`
	Duration time.Duration `json:"duration_ns"`
	// Output is the tail of the test output, for a person reading why.
	Output string `json:"output,omitempty"`
}

// Counts returns how many tests of outs passed and how many there are.
func Counts(outs []TestOutcome) (passed, total int) {
	for _, o := range outs {
		if o.Status == TestPassed {
			passed++
		}
	}
	return passed, len(outs)
}

// String summarises g for logs: "resolved (F2P 3/3, P2P 40/40)".
func (g *Grade) String() string {
	if g.Error != "" {
		return "not graded: " + g.Error
	}
	verdict := "unresolved"
	if g.Resolved {
		verdict = "resolved"
	}
	fp, ft := Counts(g.FailToPass)
	pp, pt := Counts(g.PassToPass)
	return fmt.Sprintf("%s (FAIL_TO_PASS %d/%d, PASS_TO_PASS %d/%d)", verdict, fp, ft, pp, pt)
}

// Verdict judges a graded task: resolved when its grading ran and every
// test of both lists passed; otherwise whose failure it is, FaultModel or
// FaultInfra, SWE-bench style. The worker's own Fault is used when it set
// one (setup and input faults count as the infrastructure's: the model is
// not to blame). Otherwise a task that failed (engine, image, clone), was
// rejected or cancelled, or whose grading could not run, is the
// infrastructure's; anything the agent ran to an end and the tests judged,
// a limit it ran into (turns, cost, the time limit) or a model endpoint
// that kept failing, is the model's.
func (r *Result) Verdict() (resolved bool, fault Fault) {
	if g := r.Grade; g != nil && g.Error == "" && g.Resolved {
		return true, FaultNone
	}
	switch r.Fault {
	case FaultInfra, FaultSetup, FaultInput:
		return false, FaultInfra
	case FaultModel:
		return false, FaultModel
	}
	switch r.Status {
	case StateFailed:
		if strings.HasPrefix(r.Reason, "model_error") {
			return false, FaultModel
		}
		return false, FaultInfra
	case StateRejected, StateCancelled:
		return false, FaultInfra
	case StateTimedOut:
		return false, FaultModel
	}
	if r.Grade == nil || r.Grade.Error != "" {
		return false, FaultInfra
	}
	return false, FaultModel
}
