package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/memenv"
)

const calcGo = "package calc\n\nfunc Add(a, b int) int {\n\treturn a - b\n}\n"

func TestRunFixesBug(t *testing.T) {
	env := memenv.New(map[string]string{"calc.go": calcGo})
	testCommand(env, "go test ./...", func() (int, string) {
		if src, _ := env.File("calc.go"); strings.Contains(src, "a + b") {
			return 0, "ok  \tcalc\t0.002s\n"
		}
		return 1, "--- FAIL: TestAdd (0.00s)\n    calc_test.go:6: Add(1, 2) = -1, want 3\nFAIL\n"
	})
	r, m := newRun(env,
		calls(call("bash", map[string]any{"command": "go test ./..."})),
		calls(call("view", map[string]any{"path": "calc.go"})),
		calls(call("edit", map[string]any{"path": "calc.go", "old_string": "return a - b", "new_string": "return a + b"})),
		finish("Add adds."),
	)
	out, err := agent.New(agent.Config{}).Run(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if out.Reason != agent.StopFinished {
		t.Fatalf("reason = %s (%v)", out.Reason, out.Err)
	}
	if got, _ := env.File("calc.go"); !strings.Contains(got, "return a + b") {
		t.Errorf("calc.go = %q", got)
	}
	res := toolResults(out.Messages)
	if len(res) != 4 {
		t.Fatalf("%d tool results", len(res))
	}
	if !strings.Contains(res[0].Content, "Exit code: 1 (error class: assertion)") {
		t.Errorf("bash result = %q", res[0].Content)
	}
	if !strings.Contains(res[2].Content, "-\treturn a - b") || !strings.Contains(res[2].Content, "+1 -1") {
		t.Errorf("edit result = %q", res[2].Content)
	}
	if len(m.requests()) != 4 {
		t.Errorf("%d model calls", len(m.requests()))
	}
}
