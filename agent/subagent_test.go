package agent_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/task"
)

func toolNames(specs []agent.ToolSpec) []string {
	var out []string
	for _, s := range specs {
		out = append(out, s.Name)
	}
	return out
}

func TestResearchToolIsOptional(t *testing.T) {
	on := agent.New(agent.Config{SubAgents: agent.SubAgentConfig{Enabled: true}})
	off := agent.New(agent.Config{})
	for _, tc := range []struct {
		name    string
		a       *agent.Agent
		mode    task.Mode
		allowed []string
		want    bool
	}{
		{"off by default", off, task.ModeNormal, nil, false},
		{"enabled", on, task.ModeNormal, nil, true},
		{"allowlisted", off, task.ModeNormal, []string{"view", "research"}, true},
		{"enabled but not allowlisted", on, task.ModeNormal, []string{"view"}, false},
		{"never in plan mode", on, task.ModePlan, nil, false},
	} {
		specs, err := tc.a.Tools(tc.mode, tc.allowed)
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Contains(toolNames(specs), "research"); got != tc.want {
			t.Errorf("%s: research offered = %v (%v)", tc.name, got, toolNames(specs))
		}
	}
}

func TestResearchRunsAReadOnlySubAgent(t *testing.T) {
	env := memenv.New(map[string]string{"calc.go": calcGo})
	var rec recorder
	var traj bytes.Buffer
	r, m := newRun(env,
		calls(call("research", map[string]any{"question": "Where is Add defined?"})),
		// The sub-run's replies: it tries to edit, views, then answers.
		calls(edit("calc.go", "a - b", "a + b"), view("calc.go")),
		finish("Add is in calc.go line 3; it subtracts."),
		// The parent again.
		finish("done"),
	)
	r.Task.TestCommand = ""
	r.OnEvent = rec.on
	r.Trajectory = &traj
	cfg := agent.Config{SubAgents: agent.SubAgentConfig{Enabled: true}, Prices: map[string]agent.Price{"scripted": {InputPerMTok: 1}}}
	out, err := agent.New(cfg).Run(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	reqs := m.requests()
	if len(reqs) != 4 {
		t.Fatalf("%d model calls", len(reqs))
	}
	sub := reqs[1]
	if got := toolNames(sub.Tools); !slices.Equal(got, []string{"view", "ls", "glob", "grep", "finish"}) {
		t.Errorf("sub-agent tools = %v", got)
	}
	if !strings.Contains(sub.Messages[0].Content, "research sub-agent") || !strings.Contains(sub.Messages[1].Content, "<question>\nWhere is Add defined?\n</question>") {
		t.Errorf("sub-agent prompts:\n%s\n---\n%s", sub.Messages[0].Content, sub.Messages[1].Content)
	}
	if got, _ := env.File("calc.go"); got != calcGo {
		t.Errorf("the sub-agent changed calc.go: %q", got)
	}
	res := toolResults(out.Messages)
	if len(res) != 2 || res[0].Content != "Research findings:\nAdd is in calc.go line 3; it subtracts." {
		t.Errorf("parent results = %+v", res)
	}
	// The parent's usage and events count the sub-run's model calls.
	if out.Usage.ModelCalls != 4 || out.Usage.InputTokens != 400 || out.Usage.Turns != 2 || out.Reason != agent.StopFinished {
		t.Errorf("usage %+v, reason %s", out.Usage, out.Reason)
	}
	if n := len(rec.of(task.EventUsage)); n != 4 {
		t.Errorf("%d usage events, want 4", n)
	}
	if !bytes.Contains(traj.Bytes(), []byte(`"note":"research sub-run"`)) {
		t.Errorf("trajectory lacks the sub-run's usage")
	}
	// Replay cannot re-ask a model: the research call is skipped.
	recs, err := agent.ReadTrajectory(&traj)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := agent.Replay(context.Background(), memenv.New(map[string]string{"calc.go": calcGo}), recs)
	if err != nil || rep.Calls != 0 || rep.Skipped != 2 {
		t.Errorf("replay %+v %v", rep, err)
	}
}

func TestResearchLimits(t *testing.T) {
	t.Run("a sub-run without an answer is an error result", func(t *testing.T) {
		var replies []reply
		replies = append(replies, calls(call("research", map[string]any{"question": "q"})))
		for i := 0; i < 2; i++ {
			r := calls(view("calc.go"))
			r.resp.Message.Content = "Still looking"
			replies = append(replies, r)
		}
		replies = append(replies, finish("done"))
		r, _ := newRun(memenv.New(map[string]string{"calc.go": calcGo}), replies...)
		r.Task.TestCommand = ""
		out, _ := agent.New(agent.Config{SubAgents: agent.SubAgentConfig{Enabled: true, MaxTurns: 2}}).Run(context.Background(), r)
		res := toolResults(out.Messages)
		if out.Reason != agent.StopFinished || !strings.Contains(res[0].Content, "stopped (max_turns) without a conclusion") || !strings.Contains(res[0].Content, "Still looking") {
			t.Errorf("reason %s, result %q", out.Reason, res[0].Content)
		}
	})
	t.Run("at most MaxPerRun sub-runs", func(t *testing.T) {
		q := call("research", map[string]any{"question": "q"})
		r, m := newRun(memenv.New(nil), calls(q), finish("a1"), calls(q), finish("done"))
		r.Task.TestCommand = ""
		out, _ := agent.New(agent.Config{SubAgents: agent.SubAgentConfig{Enabled: true, MaxPerRun: 1}}).Run(context.Background(), r)
		res := toolResults(out.Messages)
		if len(m.requests()) != 4 || !strings.Contains(res[1].Content, "used all 1 research sub-agents") {
			t.Errorf("%d model calls, results %+v", len(m.requests()), res)
		}
	})
	t.Run("the sub-run gets what is left of the cost budget", func(t *testing.T) {
		// Each call costs $0.0001 (100 input tokens at $1/MTok); the
		// parent may spend $0.00025 in all.
		q := call("research", map[string]any{"question": "q"})
		r, m := newRun(memenv.New(map[string]string{"a": "x"}), calls(q), calls(view("a")), calls(view("a")), calls(view("a")), finish("x"))
		r.Task.TestCommand = ""
		r.Limits.MaxCostUSD = 0.00025
		cfg := agent.Config{SubAgents: agent.SubAgentConfig{Enabled: true}, Prices: map[string]agent.Price{"scripted": {InputPerMTok: 1}}}
		out, _ := agent.New(cfg).Run(context.Background(), r)
		res := toolResults(out.Messages)
		if len(m.requests()) != 3 || out.Reason != agent.StopMaxCost || !strings.Contains(res[0].Content, "stopped (max_cost)") {
			t.Errorf("%d model calls, reason %s, result %q", len(m.requests()), out.Reason, res[0].Content)
		}
	})
}
