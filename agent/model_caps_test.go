package agent_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/task"
)

// capModel is a fakeModel that reports capabilities.
type capModel struct {
	*fakeModel
	caps agent.Capabilities
}

func (m *capModel) Capabilities() agent.Capabilities { return m.caps }

func TestModelCapabilities(t *testing.T) {
	t.Run("a model without tool calling gets the text protocol", func(t *testing.T) {
		env := memenv.New(nil)
		r, m := newRun(env, text("THOUGHT: look\n\n```bash\necho hi\n```"), text("```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"))
		r.Model = &capModel{fakeModel: m, caps: agent.Capabilities{NoToolCalling: true}}
		r.Task.TestCommand = ""
		out, _ := agent.New(agent.Config{}).Run(context.Background(), r)
		req := m.requests()[0]
		if out.Reason != agent.StopFinished || len(req.Tools) != 0 || !strings.Contains(req.Messages[0].Content, "exactly ONE bash code block") {
			t.Errorf("reason %s, %d tools offered", out.Reason, len(req.Tools))
		}
	})
	t.Run("an explicit protocol wins", func(t *testing.T) {
		r, m := newRun(memenv.New(nil), finish("ok"))
		r.Model = &capModel{fakeModel: m, caps: agent.Capabilities{NoToolCalling: true}}
		r.Protocol = task.ProtocolTools
		r.Task.TestCommand = ""
		if out, _ := agent.New(agent.Config{}).Run(context.Background(), r); out.Reason != agent.StopFinished || len(m.requests()[0].Tools) == 0 {
			t.Errorf("reason %s", out.Reason)
		}
	})
	t.Run("the reported context window drives compaction; the operator's table wins", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			table  map[string]int
			elided bool
		}{{"reported", nil, true}, {"table", map[string]int{"scripted": 1_000_000}, false}} {
			env := memenv.New(nil)
			r, m := newRun(env, append(bigOutputs(env, 6, 2000), finish("ok"))...)
			r.Model = &capModel{fakeModel: m, caps: agent.Capabilities{ContextWindow: 4000}}
			r.Task.TestCommand = ""
			out, _ := agent.New(agent.Config{ContextWindows: tc.table, Compaction: agent.CompactionConfig{KeepTurns: 1}}).Run(context.Background(), r)
			elided := strings.Contains(toolResults(out.Messages)[0].Content, "[output elided")
			if elided != tc.elided {
				t.Errorf("%s: elided = %v", tc.name, elided)
			}
		}
	})
}

// TestPartialWorkStaysInTheWorkspace: a run that ends on a limit leaves its
// edits in the workspace, where the caller takes the diff (once, after its
// own verification).
func TestPartialWorkStaysInTheWorkspace(t *testing.T) {
	env := memenv.New(map[string]string{"calc.go": calcGo})
	r, _ := newRun(env, calls(view("calc.go")), calls(edit("calc.go", "a - b", "a + b")), calls(view("calc.go")), finish("x"))
	ws := &countingDiffs{Env: env}
	r.Workspace = ws
	r.Verify = agent.VerifyNever
	r.Limits.MaxTurns = 2
	out, _ := agent.New(agent.Config{}).Run(context.Background(), r)
	d, err := env.Diff(context.Background())
	if out.Reason != agent.StopMaxTurns || err != nil || !strings.Contains(d, "-\treturn a - b\n+\treturn a + b") {
		t.Errorf("reason %s, diff %q, %v", out.Reason, d, err)
	}
	if ws.diffs != 0 {
		t.Errorf("the agent computed the diff %d times; the caller takes it", ws.diffs)
	}
}

// countingDiffs counts the calls of Diff.
type countingDiffs struct {
	*memenv.Env
	diffs int
}

func (c *countingDiffs) Diff(ctx context.Context) (string, error) {
	c.diffs++
	return c.Env.Diff(ctx)
}

func TestPinnedClockDoesNotBreakTheWallClockLimit(t *testing.T) {
	// Config.Now pins dates in prompts and records; the wall-clock limit
	// and durations use the real clock.
	past := func() time.Time { return time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC) }
	r, _ := newRun(memenv.New(nil), calls(call("bash", map[string]any{"command": "true"})), finish("ok"))
	r.Task.TestCommand = ""
	r.Limits.Timeout = time.Hour
	out, _ := agent.New(agent.Config{Now: past}).Run(context.Background(), r)
	if out.Reason != agent.StopFinished || out.Duration <= 0 || out.Duration > time.Hour {
		t.Errorf("reason %s, duration %s", out.Reason, out.Duration)
	}
}

func TestToolResultsHaveDisplayAndModelContents(t *testing.T) {
	env := memenv.New(map[string]string{"a.txt": "alpha\nbeta\n"})
	var rec recorder
	var traj bytes.Buffer
	r, _ := newRun(env, calls(view("a.txt"), call("grep", map[string]any{"pattern": "beta"})), finish("ok"))
	r.Task.TestCommand = ""
	r.OnEvent = rec.on
	r.Trajectory = &traj
	out, _ := agent.New(agent.Config{}).Run(context.Background(), r)
	res := toolResults(out.Messages)
	ev := rec.of(task.EventToolResult)
	if !strings.Contains(res[0].Content, "     2\tbeta") || ev[0].Text != "viewed a.txt: lines 1-2 of 2" {
		t.Errorf("view: model %q, display %q", res[0].Content, ev[0].Text)
	}
	if res[1].Content != "a.txt:2:beta" || ev[1].Text != "grep beta: 1 matches" {
		t.Errorf("grep: model %q, display %q", res[1].Content, ev[1].Text)
	}
	if !bytes.Contains(traj.Bytes(), []byte(`"display":"viewed a.txt: lines 1-2 of 2"`)) {
		t.Errorf("trajectory lacks the display content")
	}
}

func TestHumanMode(t *testing.T) {
	for _, protocol := range []task.Protocol{task.ProtocolTools, task.ProtocolText} {
		t.Run(string(protocol), func(t *testing.T) {
			env := memenv.New(map[string]string{"a.txt": "hello\n"})
			var screen bytes.Buffer
			r, _ := newRun(env)
			r.Model = agent.NewHumanModel(strings.NewReader("cat a.txt\n\nexit\n"), &screen)
			r.Protocol = protocol
			r.Task.TestCommand = ""
			out, err := agent.New(agent.Config{}).Run(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			cmds := strings.Join(env.Commands(), "|")
			if out.Reason != agent.StopFinished || !strings.HasPrefix(cmds, "cat a.txt") {
				t.Errorf("reason %s, commands %q", out.Reason, cmds)
			}
			if s := screen.String(); !strings.Contains(s, "<task>\nFix Add.\n</task>") || !strings.Contains(s, "hello") || strings.Count(s, "wrench$ ") != 3 {
				t.Errorf("screen:\n%s", s)
			}
		})
	}
}
