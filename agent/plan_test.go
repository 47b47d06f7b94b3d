package agent_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/task"
)

func TestPlanThenExecute(t *testing.T) {
	env := memenv.New(map[string]string{"calc.go": calcGo})
	var rec recorder
	var traj bytes.Buffer
	plan := "1. Change a - b to a + b in calc.go.\n2. Run the tests."
	r, m := newRun(env,
		calls(view("calc.go"), edit("calc.go", "a - b", "a + b")),
		calls(call("finish", map[string]any{"summary": plan}), call("bash", map[string]any{"command": "echo too early"})),
		calls(edit("calc.go", "a - b", "a + b")),
		finish("Add adds."),
	)
	r.Task.TestCommand = ""
	r.PlanFirst = true
	r.OnEvent = rec.on
	r.Trajectory = &traj
	out, err := agent.New(agent.Config{}).Run(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if out.Reason != agent.StopFinished || out.Summary != "Add adds." || out.Plan != plan {
		t.Fatalf("reason %s, summary %q, plan %q", out.Reason, out.Summary, out.Plan)
	}
	reqs := m.requests()
	if got := toolNames(reqs[0].Tools); !slices.Equal(got, []string{"view", "ls", "glob", "grep", "finish"}) {
		t.Errorf("planning tools = %v", got)
	}
	if got := toolNames(reqs[2].Tools); len(got) != 10 || !slices.Contains(got, "edit") {
		t.Errorf("execution tools = %v", got)
	}
	if !strings.Contains(reqs[0].Messages[0].Content, "You plan first") || !strings.Contains(reqs[0].Messages[1].Content, "0. Plan first") {
		t.Errorf("the prompts do not explain the phases")
	}
	res := toolResults(out.Messages)
	if !strings.Contains(res[1].Content, `tool "edit" is not available in this run (mode "planning")`) {
		t.Errorf("edit while planning: %q", res[1].Content)
	}
	if !strings.HasPrefix(res[2].Content, "Plan recorded.") || !strings.HasPrefix(res[3].Content, "Not run: the plan was recorded") {
		t.Errorf("plan results: %q / %q", res[2].Content, res[3].Content)
	}
	if slices.Contains(env.Commands(), "echo too early") {
		t.Errorf("a call after the plan ran: %q", env.Commands())
	}
	if got, _ := env.File("calc.go"); !strings.Contains(got, "a + b") {
		t.Errorf("the plan was not carried out: %q", got)
	}
	var phases []string
	for _, e := range rec.of(task.EventPhase) {
		phases = append(phases, e.Phase)
	}
	if !slices.Contains(phases, "execute") {
		t.Errorf("phases = %v", phases)
	}
	if !bytes.Contains(traj.Bytes(), []byte(`"kind":"plan"`)) {
		t.Errorf("trajectory lacks the plan")
	}
}

func TestPlanFirstNeedsToolsAndNormalMode(t *testing.T) {
	for _, r := range []*agent.Run{
		{Mode: task.ModePlan, PlanFirst: true},
		{Protocol: task.ProtocolText, PlanFirst: true},
	} {
		r.Model, r.Env, r.EnvInfo = &fakeModel{}, memenv.New(nil), envInfo
		if _, err := agent.New(agent.Config{}).Run(context.Background(), r); !errors.Is(err, agent.ErrInvalidRun) {
			t.Errorf("%+v: err = %v", r, err)
		}
	}
}
