package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/sandbox"
)

func TestClassifyError(t *testing.T) {
	for _, tc := range []struct {
		out      string
		code     int
		timedOut bool
		want     string
	}{
		{"ModuleNotFoundError: No module named 'requests'", 1, false, agent.ClassMissingDependency},
		{"bash: pytest: command not found", 127, false, agent.ClassMissingDependency},
		{"main.go:3:1: no required module provides package github.com/x/y", 1, false, agent.ClassMissingDependency},
		{"  File \"a.py\", line 4\n    def f()\n           ^\nSyntaxError: expected ':'", 1, false, agent.ClassSyntax},
		{"./calc.go:4:9: undefined: foo", 1, false, agent.ClassSyntax},
		{"--- FAIL: TestAdd (0.00s)\n    calc_test.go:6: got -1, want 3", 1, false, agent.ClassAssertion},
		{"E   AssertionError: assert 1 == 2", 1, false, agent.ClassAssertion},
		{"open /etc/shadow: permission denied", 1, false, agent.ClassPermission},
		{"PermissionError: [Errno 13]", 1, false, agent.ClassPermission},
		{"bash: fork: retry: Resource temporarily unavailable\nbash: fork: Resource temporarily unavailable", 254, false, agent.ClassResources},
		{"bash: fork: Resource temporarily unavailable", 126, false, agent.ClassResources},
		{"write /workspace/big: no space left on device", 1, false, agent.ClassResources},
		{"fatal error: runtime: cannot allocate memory", 2, false, agent.ClassResources},
		{"", 137, false, agent.ClassResources},
		{"", 124, false, agent.ClassTimeout},
		{"partial", 0, true, agent.ClassTimeout},
		{"something odd happened", 3, false, agent.ClassUnknown},
	} {
		if got := agent.ClassifyError(tc.out, tc.code, tc.timedOut); got != tc.want {
			t.Errorf("ClassifyError(%q, %d) = %s, want %s", tc.out, tc.code, got, tc.want)
		}
	}
}

func TestErrorSignatureNormalises(t *testing.T) {
	same := [][2]string{
		{"panic: nil pointer at 0xc000123 in goroutine 7", "panic: nil pointer at 0xc000999 in goroutine 12"},
		{`File "/tmp/pytest-of-root/pytest-3/test_x.py", line 12, in test_x`, `File "/tmp/pytest-of-root/pytest-9/test_x.py", line 40, in test_x`},
		{"calc_test.go:6: Add(1, 2) = -1\nFAIL calc 0.002s", "calc_test.go:9: Add(1, 2) = -1\nFAIL calc 0.131s"},
	}
	for _, p := range same {
		if agent.ErrorSignature("x", p[0]) != agent.ErrorSignature("x", p[1]) {
			t.Errorf("signatures differ:\n%s\n%s", p[0], p[1])
		}
	}
	if agent.ErrorSignature("x", "error: a is undefined") == agent.ErrorSignature("x", "error: b is undefined") {
		t.Errorf("different errors share a signature")
	}
}

func TestRepeatedErrorsEscalate(t *testing.T) {
	env := memenv.New(map[string]string{"a.py": "x\n"})
	n := 0
	env.Handle("python a.py", func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		n++ // the same error at another line each time
		return sandbox.ExecResult{ExitCode: 1, Output: []byte(fmt.Sprintf("Traceback (most recent call last):\n  File \"a.py\", line %d\nNameError: name 'y' is not defined\n", n))}, nil
	})
	run := func(cmd string) agent.ToolCall { return call("bash", map[string]any{"command": cmd}) }
	r, _ := newRun(env,
		calls(run("python a.py")),
		calls(view("a.py"), edit("a.py", "x", "x1")), calls(run("python a.py")),
		calls(view("a.py"), edit("a.py", "x1", "x2")), calls(run("python a.py")),
		finish("giving up"),
	)
	r.Task.TestCommand = ""
	out, _ := agent.New(agent.Config{}).Run(context.Background(), r)
	res := toolResults(out.Messages)
	var bash []string
	for _, m := range res {
		if strings.Contains(m.Content, "NameError") {
			bash = append(bash, m.Content)
		}
	}
	if len(bash) != 3 {
		t.Fatalf("%d bash results", len(bash))
	}
	if strings.Contains(bash[0], "Note:") || !strings.Contains(bash[0], "Exit code: 1 (error class: assertion)") {
		t.Errorf("first failure: %q", bash[0])
	}
	if !strings.Contains(bash[1], "same error as an earlier attempt") {
		t.Errorf("second failure lacks the repeat note: %q", bash[1])
	}
	if !strings.Contains(bash[2], "occurred 3 times") || !strings.Contains(bash[2], "completely different approach") {
		t.Errorf("third failure lacks the escalation: %q", bash[2])
	}
}

func TestAttemptBudgetNudge(t *testing.T) {
	env := memenv.New(map[string]string{"a.go": "v0\n"})
	n := 0
	env.Handle("go build", func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		n++ // a different error each time: only the budget speaks
		return sandbox.ExecResult{ExitCode: 1, Output: []byte(fmt.Sprintf("./a.go:1:1: undefined: sym%c\n", 'a'+n))}, nil
	})
	var replies []reply
	replies = append(replies, calls(view("a.go")))
	for i := 0; i < 3; i++ {
		replies = append(replies, calls(edit("a.go", fmt.Sprintf("v%d", i), fmt.Sprintf("v%d", i+1)), call("bash", map[string]any{"command": "go build"})))
	}
	r, _ := newRun(env, append(replies, finish("x"))...)
	r.Task.TestCommand = ""
	out, _ := agent.New(agent.Config{Recovery: agent.RecoveryConfig{AttemptBudget: 3}}).Run(context.Background(), r)
	var nudged []int
	i := 0
	for _, m := range toolResults(out.Messages) {
		if strings.Contains(m.Content, "undefined: sym") {
			i++
			if strings.Contains(m.Content, "completely different strategy") {
				nudged = append(nudged, i)
			}
		}
	}
	if len(nudged) != 1 || nudged[0] != 3 {
		t.Errorf("nudged at failures %v, want [3]", nudged)
	}
}

func TestLoopDetection(t *testing.T) {
	same := calls(call("bash", map[string]any{"command": "ls -la"}))
	other := calls(call("bash", map[string]any{"command": "pwd"}))
	env := memenv.New(nil)
	env.Handle("ls", func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		return sandbox.ExecResult{Output: []byte("a.go\n")}, nil
	})
	t.Run("nudge, then stop", func(t *testing.T) {
		r, m := newRun(env, same, same, other, same, same, same, finish("never"))
		r.Task.TestCommand = ""
		out, _ := agent.New(agent.Config{}).Run(context.Background(), r)
		if out.Reason != agent.StopLoopDetected || len(m.requests()) != 6 {
			t.Fatalf("reason %s after %d calls", out.Reason, len(m.requests()))
		}
		res := toolResults(out.Messages)
		if !strings.Contains(res[3].Content, "exact call 3 times") {
			t.Errorf("third repeat lacks the nudge: %q", res[3].Content)
		}
		if !strings.Contains(res[5].Content, "The run is stopped") {
			t.Errorf("last result: %q", res[5].Content)
		}
	})
	t.Run("argument spacing does not hide a repeat", func(t *testing.T) {
		spaced := calls(agent.ToolCall{Name: "bash", Arguments: `{ "command" : "ls -la" }`})
		r, _ := newRun(env, same, spaced, same, spaced, spaced, finish("never"))
		r.Task.TestCommand = ""
		out, _ := agent.New(agent.Config{}).Run(context.Background(), r)
		if out.Reason != agent.StopLoopDetected {
			t.Errorf("reason %s", out.Reason)
		}
	})
	t.Run("results differing only in timing are the same", func(t *testing.T) {
		e := memenv.New(nil)
		k := 0
		e.Handle("go test", func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
			k++
			return sandbox.ExecResult{ExitCode: 1, Output: []byte(fmt.Sprintf("--- FAIL: TestA (0.0%ds)\nFAIL\tcalc\t0.%03ds\n", k, k))}, nil
		})
		gt := calls(call("bash", map[string]any{"command": "go test"}))
		r, _ := newRun(e, gt, gt, gt, gt, gt, finish("never"))
		r.Task.TestCommand = ""
		out, _ := agent.New(agent.Config{}).Run(context.Background(), r)
		if out.Reason != agent.StopLoopDetected {
			t.Errorf("reason %s", out.Reason)
		}
	})
	t.Run("a different result is not a loop", func(t *testing.T) {
		e := memenv.New(nil)
		k := 0
		e.Handle("ls", func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
			k++
			return sandbox.ExecResult{Output: []byte(fmt.Sprint(k))}, nil
		})
		r, _ := newRun(e, same, same, same, same, same, finish("ok"))
		r.Task.TestCommand = ""
		out, _ := agent.New(agent.Config{}).Run(context.Background(), r)
		if out.Reason != agent.StopFinished {
			t.Errorf("reason %s", out.Reason)
		}
	})
}

func TestSuccessOfAFailedCommandEndsTheSubtask(t *testing.T) {
	env := memenv.New(map[string]string{"a.go": "v0\n"})
	n := 0
	env.Handle("go build", func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		n++
		if n == 3 { // the third build passes: the subtask is done
			return sandbox.ExecResult{}, nil
		}
		return sandbox.ExecResult{ExitCode: 1, Output: []byte(fmt.Sprintf("./a.go:1:1: undefined: sym%c\n", 'a'+n))}, nil
	})
	var replies []reply
	replies = append(replies, calls(view("a.go")))
	for i := 0; i < 4; i++ {
		replies = append(replies, calls(edit("a.go", fmt.Sprintf("v%d", i), fmt.Sprintf("v%d", i+1)), call("bash", map[string]any{"command": "go build"})))
	}
	r, _ := newRun(env, append(replies, finish("x"))...)
	r.Task.TestCommand = ""
	out, _ := agent.New(agent.Config{Recovery: agent.RecoveryConfig{AttemptBudget: 3}}).Run(context.Background(), r)
	// Failures 1, 2, (pass), 4: the budget of 3 is never used up.
	for _, m := range toolResults(out.Messages) {
		if strings.Contains(m.Content, "completely different strategy") {
			t.Errorf("nudged although the build passed in between:\n%s", m.Content)
		}
	}
}
