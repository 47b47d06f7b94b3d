package agent_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/sandbox"
)

const secret = "s3cr3t-token-value"

// recordRun runs a small fix with a trajectory and returns its bytes.
func recordRun(t *testing.T) []byte {
	t.Helper()
	env := memenv.New(map[string]string{"calc.go": calcGo})
	env.Handle("env", func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		return sandbox.ExecResult{Output: []byte("API_KEY=" + secret + "\nGH=ghp_abcdefghijklmnopqrstuvwxyz0123456789\n")}, nil
	})
	var buf bytes.Buffer
	r, _ := newRun(env,
		calls(call("bash", map[string]any{"command": "env"})),
		calls(view("calc.go"), edit("calc.go", "a - b", "a + b")),
		calls(call("bash", map[string]any{"command": "cat calc.go"})),
		finish("fixed with "+secret),
	)
	r.Task.TestCommand = ""
	r.Trajectory = &buf
	r.Secrets = []string{secret}
	if _, err := agent.New(agent.Config{}).Run(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestTrajectory(t *testing.T) {
	raw := recordRun(t)
	if bytes.Contains(raw, []byte(secret)) || bytes.Contains(raw, []byte("ghp_abcdef")) {
		t.Errorf("trajectory leaks a secret")
	}
	if !bytes.Contains(raw, []byte("[REDACTED]")) {
		t.Errorf("nothing redacted")
	}
	recs, err := agent.ReadTrajectory(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[agent.RecordKind]int{}
	for i, r := range recs {
		kinds[r.Kind]++
		if r.Seq != int64(i+1) || r.Time.IsZero() {
			t.Errorf("record %d: seq %d time %v", i, r.Seq, r.Time)
		}
	}
	if recs[0].Kind != agent.RecordRunStart || recs[0].TaskID != "t-1" || recs[len(recs)-1].Kind != agent.RecordOutcome || recs[len(recs)-1].Reason != agent.StopFinished {
		t.Errorf("first %+v last %+v", recs[0], recs[len(recs)-1])
	}
	if kinds[agent.RecordToolCall] != 5 || kinds[agent.RecordToolResult] != 5 || kinds[agent.RecordUsage] != 4 || kinds[agent.RecordMessage] < 10 {
		t.Errorf("record kinds = %v", kinds)
	}
	for _, r := range recs {
		if r.Kind == agent.RecordToolResult && r.Duration == 0 && r.Call.Name != "finish" {
			t.Errorf("tool result without timing: %+v", r)
		}
	}
	if _, err := agent.ReadTrajectory(strings.NewReader("{\"seq\":1}\nnot json\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad line: %v", err)
	}
}

func TestReplay(t *testing.T) {
	recs, err := agent.ReadTrajectory(bytes.NewReader(recordRun(t)))
	if err != nil {
		t.Fatal(err)
	}
	fresh := func(calc string) *memenv.Env {
		env := memenv.New(map[string]string{"calc.go": calc})
		env.Handle("env", func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
			return sandbox.ExecResult{Output: []byte("API_KEY=[REDACTED]\nGH=[REDACTED]\n")}, nil
		})
		return env
	}
	t.Run("same repository, same observations", func(t *testing.T) {
		env := fresh(calcGo)
		rep, err := agent.Replay(context.Background(), env, recs)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Calls != 4 || rep.Matched != 4 || rep.Skipped != 1 || rep.First() != nil {
			t.Errorf("report = %+v", rep)
		}
		if got, _ := env.File("calc.go"); !strings.Contains(got, "a + b") {
			t.Errorf("replay did not re-apply the edit: %q", got)
		}
	})
	t.Run("a different repository diverges where it shows", func(t *testing.T) {
		rep, err := agent.Replay(context.Background(), fresh(strings.Replace(calcGo, "package calc", "package calc // v2", 1)), recs)
		if err != nil {
			t.Fatal(err)
		}
		d := rep.First()
		if d == nil || d.Tool != "view" || !strings.Contains(d.Replayed, "// v2") || rep.Matched == 0 {
			t.Errorf("report = %+v", rep)
		}
	})
}

func TestEventsAreRedacted(t *testing.T) {
	env := memenv.New(nil)
	env.Handle("env", func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		return sandbox.ExecResult{Output: []byte("API_KEY=" + secret + "\n")}, nil
	})
	var rec recorder
	r, _ := newRun(env, calls(call("bash", map[string]any{"command": "env"})), finish("ok"))
	r.Task.TestCommand = ""
	r.OnEvent = rec.on
	r.Secrets = []string{secret}
	if _, err := agent.New(agent.Config{}).Run(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	saw := false
	for _, e := range rec.events {
		if strings.Contains(e.Text, secret) {
			t.Errorf("%s event leaks the secret: %q", e.Kind, e.Text)
		}
		saw = saw || strings.Contains(e.Text, "API_KEY=[REDACTED]")
	}
	if !saw {
		t.Errorf("no event shows the redacted output")
	}
}

// TestTrajectoryIsReadable: code's <, > and & stay as they are (no \u003c),
// a secret holding them is still redacted, and run_start records the base
// commit replay starts from.
func TestTrajectoryIsReadable(t *testing.T) {
	const htmlSecret = "p<ss&w>rd-42"
	env := memenv.New(map[string]string{"calc.go": calcGo})
	env.Handle("show", func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		return sandbox.ExecResult{Output: []byte("if a < b && c > d { return <html> }\nTOKEN=" + htmlSecret + "\n")}, nil
	})
	var buf bytes.Buffer
	r, _ := newRun(env, calls(call("bash", map[string]any{"command": "show"})), finish("done"))
	r.Task.TestCommand = ""
	r.Trajectory = &buf
	r.Secrets = []string{htmlSecret}
	r.BaseCommit = "0123456789abcdef0123456789abcdef01234567"
	if _, err := agent.New(agent.Config{}).Run(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	raw := buf.String()
	if strings.Contains(raw, `\u003c`) || strings.Contains(raw, `\u0026`) || !strings.Contains(raw, "if a < b && c > d { return <html> }") {
		t.Errorf("trajectory escapes HTML:\n%s", raw)
	}
	if strings.Contains(raw, "p<ss&w>rd") || !strings.Contains(raw, "TOKEN=[REDACTED]") {
		t.Errorf("secret with HTML characters not redacted:\n%s", raw)
	}
	recs, err := agent.ReadTrajectory(strings.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if recs[0].Kind != agent.RecordRunStart || recs[0].BaseCommit != r.BaseCommit {
		t.Errorf("run_start %+v lacks the base commit", recs[0])
	}
}
