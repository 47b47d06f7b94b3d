package agent_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/task"
)

// suite is a fake test suite over calc.go: TestAdd passes when Add adds,
// TestSub fails when Sub is missing "a - b".
func suite(env *memenv.Env, runs *int) {
	testCommand(env, "go test ./...", func() (int, string) {
		*runs++
		src, _ := env.File("calc.go")
		var out strings.Builder
		code := 0
		if !strings.Contains(src, "return a + b") {
			out.WriteString("--- FAIL: TestAdd (0.00s)\n    calc_test.go:6: wrong sum\n")
			code = 1
		}
		if !strings.Contains(src, "return a - b") {
			out.WriteString("--- FAIL: TestSub (0.00s)\n    calc_test.go:12: wrong difference\n")
			code = 1
		}
		if code == 0 {
			return 0, "ok  \tcalc\t0.002s\n"
		}
		out.WriteString("FAIL\nFAIL\tcalc\t0.003s\n")
		return code, out.String()
	})
}

const calc2 = "package calc\n\nfunc Add(a, b int) int {\n\treturn a * b\n}\n\nfunc Sub(a, b int) int {\n\treturn a - b\n}\n"

func TestVerification(t *testing.T) {
	fix := calls(edit("calc.go", "return a * b", "return a + b"))
	breakSub := calls(edit("calc.go", "return a - b", "return a + b // oops"))
	failingBase := &task.TestRun{Command: "go test ./...", ExitCode: 1, Output: "--- FAIL: TestAdd (0.00s)\nFAIL\n"}
	passingBase := &task.TestRun{Command: "go test ./...", ExitCode: 0, Passed: true, Output: "ok\n"}
	for _, tc := range []struct {
		name      string
		policy    agent.VerifyPolicy
		baseline  *task.TestRun
		noWS      bool
		replies   []reply
		reason    agent.StopReason
		testRuns  int
		rollbacks int
		passed    bool // LastTestRun.Passed
		final     string
		said      []string // substrings of some tool result, in order
	}{
		{
			name: "finish with passing tests makes a checkpoint", baseline: failingBase,
			replies: []reply{calls(view("calc.go")), fix, finish("fixed")},
			reason:  agent.StopFinished, testRuns: 1, passed: true, final: "return a + b",
			said: []string{"Finished: the tests pass."},
		},
		{
			name: "finish with failing tests is refused, then accepted unverified", baseline: failingBase,
			replies: []reply{finish("1"), finish("2"), finish("3"), finish("4")},
			reason:  agent.StopUnverified, testRuns: 1, passed: false,
			said: []string{"Not finished: the test command `go test ./...` fails", "wrong sum", "Not finished", "Last verification output", "Finished without passing tests."},
		},
		{
			name: "after_write verifies each write", policy: agent.VerifyAfterWrite, baseline: failingBase,
			replies: []reply{calls(view("calc.go")), fix, finish("fixed")},
			reason:  agent.StopFinished, testRuns: 1, passed: true,
			said: []string{"Verification (after edit): the tests pass", "Checkpoint saved", "Finished: the tests pass."},
		},
		{
			name: "a regression from a passing state is rolled back", policy: agent.VerifyAfterWrite, baseline: passingBase,
			replies: []reply{calls(view("calc.go")), breakSub, calls(view("calc.go")), finish("done")},
			reason:  agent.StopFinished, testRuns: 1, rollbacks: 1, passed: true, final: "return a - b",
			said: []string{"REGRESSION", "passed at the last good checkpoint", "ROLLED BACK", "undone: edits to calc.go"},
		},
		{
			name: "newly failing tests are a regression even when others failed before", policy: agent.VerifyAfterWrite, baseline: failingBase,
			replies: []reply{calls(view("calc.go")), breakSub, calls(view("calc.go")), fix, finish("fixed")},
			reason:  agent.StopFinished, testRuns: 2, rollbacks: 1, passed: true, final: "return a + b",
			said: []string{"tests that passed at the last good checkpoint now fail: TestSub", "ROLLED BACK", "the tests pass"},
		},
		{
			name: "still failing the same way is not a regression", policy: agent.VerifyAfterWrite, baseline: failingBase,
			replies: []reply{calls(view("calc.go")), calls(edit("calc.go", "return a * b", "return a / b")), finish("x"), finish("x"), finish("x")},
			reason:  agent.StopUnverified, testRuns: 1, passed: false, final: "return a / b",
			said: []string{"Verification (after edit): the test command `go test ./...` fails", "Not finished"},
		},
		{
			name: "a regression at finish is rolled back and finish refused", baseline: passingBase,
			replies: []reply{calls(view("calc.go")), breakSub, finish("done"), finish("really")},
			reason:  agent.StopFinished, testRuns: 1, rollbacks: 1, passed: true, final: "return a - b",
			said: []string{"Not finished: your latest changes broke tests and were rolled back", "Finished: the tests pass."},
		},
		{
			name: "without a workspace a regression is only reported", policy: agent.VerifyAfterWrite, baseline: passingBase, noWS: true,
			replies: []reply{calls(view("calc.go")), breakSub, finish("done"), finish("done"), finish("done")},
			reason:  agent.StopUnverified, testRuns: 1, passed: false, final: "oops",
			said: []string{"nothing was rolled back: undo the breaking change yourself"},
		},
		{
			name: "never", policy: agent.VerifyNever,
			replies: []reply{finish("trust me")},
			reason:  agent.StopFinished, testRuns: 0,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := memenv.New(map[string]string{"calc.go": calc2})
			runs := 0
			suite(env, &runs)
			var rec recorder
			r, _ := newRun(env, tc.replies...)
			r.Verify = tc.policy
			r.Baseline = tc.baseline
			r.OnEvent = rec.on
			if !tc.noWS {
				r.Workspace = env
			}
			out, err := agent.New(agent.Config{}).Run(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			if out.Reason != tc.reason || runs != tc.testRuns || out.Rollbacks != tc.rollbacks {
				t.Errorf("reason %s, %d test runs, %d rollbacks; want %s, %d, %d", out.Reason, runs, out.Rollbacks, tc.reason, tc.testRuns, tc.rollbacks)
			}
			if tc.testRuns > 0 && (out.LastTestRun == nil || out.LastTestRun.Passed != tc.passed || out.LastTestRun.Command != "go test ./...") {
				t.Errorf("last test run = %+v", out.LastTestRun)
			}
			if tc.final != "" {
				if got, _ := env.File("calc.go"); !strings.Contains(got, tc.final) {
					t.Errorf("calc.go = %q, want it to contain %q", got, tc.final)
				}
			}
			var all strings.Builder
			for _, m := range toolResults(out.Messages) {
				all.WriteString(m.Content + "\n")
			}
			rest := all.String()
			for _, s := range tc.said {
				i := strings.Index(rest, s)
				if i < 0 {
					t.Errorf("results lack %q (in order):\n%s", s, all.String())
					break
				}
				rest = rest[i+len(s):]
			}
			if got := len(rec.of(task.EventRollback)); got != tc.rollbacks {
				t.Errorf("%d rollback events", got)
			}
			if tc.passed && tc.rollbacks == 0 && !tc.noWS && (len(rec.of(task.EventCheckpoint)) == 0 || out.Checkpoint == "") {
				t.Errorf("no checkpoint after a pass: %q", out.Checkpoint)
			}
		})
	}
}

func TestBaseCheckpointIsTakenWhenNoneGiven(t *testing.T) {
	env := memenv.New(map[string]string{"calc.go": calc2})
	runs := 0
	suite(env, &runs)
	r, _ := newRun(env, calls(view("calc.go")), calls(edit("calc.go", "return a - b", "return 0")), finish("x"))
	r.Workspace = env
	r.Verify = agent.VerifyAfterWrite
	r.Baseline = &task.TestRun{Passed: true}
	out, _ := agent.New(agent.Config{}).Run(context.Background(), r)
	if out.Rollbacks != 1 || out.Checkpoint != "cp-1" {
		t.Errorf("rollbacks %d to %q", out.Rollbacks, out.Checkpoint)
	}
	if got, _ := env.File("calc.go"); got != calc2 {
		t.Errorf("not rolled back to the base: %q", got)
	}
}

func TestFailingTests(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      []string
	}{
		{"go", "=== RUN   TestA\n--- FAIL: TestA (0.00s)\n    --- FAIL: TestA/sub (0.00s)\nFAIL\nFAIL\tpkg\t0.1s\n", []string{"TestA", "TestA/sub"}},
		{"go build", "# pkg\n./a.go:3:2: undefined: x\nFAIL\tpkg [build failed]\n", []string{"./a.go", "pkg"}},
		{"pytest", "FAILED tests/test_a.py::test_one - assert 1 == 2\nERROR tests/test_b.py::test_two\n", []string{"tests/test_a.py::test_one", "tests/test_b.py::test_two"}},
		{"unittest", "FAIL: test_add (tests.test_calc.CalcTest)\n", []string{"tests.test_calc.CalcTest.test_add"}},
		{"tap", "ok 1 - adds\nnot ok 2 - subtracts\n", []string{"subtracts"}},
		{"none", "everything is fine\n", nil},
	} {
		got := slices.Sorted(maps.Keys(agent.FailingTests(tc.out)))
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
