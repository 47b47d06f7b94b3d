package agent_test

import (
	"context"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/task"
)

// A run saves its conversation every SaveEvery turns; a second run given
// the last save point (on a tree restored to match) continues it: the
// model sees the saved conversation, the turn count goes on from the save,
// a file the first run had read may be edited without reading it again,
// and the usage adds up.
func TestResumeContinuesASavedRun(t *testing.T) {
	env := memenv.New(nil)
	r, _ := newRun(env, busy(7)...)
	r.Limits = agent.Limits{MaxTurns: 7}
	r.SaveEvery = 3
	var saves []agent.SavePoint
	r.OnSave = func(sp agent.SavePoint) { saves = append(saves, sp) }
	out, err := agent.New(agent.Config{}).Run(context.Background(), r)
	if err != nil || out.Reason != agent.StopMaxTurns {
		t.Fatalf("first run: %v %v", out, err)
	}
	if len(saves) != 2 || saves[0].Turn != 3 || saves[1].Turn != 6 {
		t.Fatalf("saves at turns %v, want 3 and 6", turnsOf(saves))
	}
	sp := saves[1]
	if sp.Usage.Turns != 6 || sp.Usage.InputTokens == 0 || sp.Read["work.txt"] == "" || sp.Messages[0].Role != agent.RoleSystem {
		t.Fatalf("save point = turn %d usage %+v read %v", sp.Turn, sp.Usage, sp.Read)
	}

	// The next attempt: the tree as it was at turn 6 (six writes: "f").
	env2 := memenv.New(map[string]string{"work.txt": "f"})
	r2, m2 := newRun(env2,
		calls(call("write", map[string]any{"path": "work.txt", "content": "resumed"})),
		finish("done"))
	r2.Resume, r2.Spent, r2.Verify = &sp, sp.Usage, agent.VerifyNever
	out2, err := agent.New(agent.Config{}).Run(context.Background(), r2)
	if err != nil || out2.Reason != agent.StopFinished {
		t.Fatalf("resumed run: %v %v", out2, err)
	}
	reqs := m2.requests()
	if len(reqs[0].Messages) != len(sp.Messages) {
		t.Errorf("first request of the resumed run has %d messages, want the %d saved", len(reqs[0].Messages), len(sp.Messages))
	}
	if got, _ := env2.File("work.txt"); got != "resumed" {
		t.Errorf("work.txt = %q: the edit was refused (%s)", got, lastUser(reqs[1].Messages))
	}
	if out2.Usage.Turns != 8 || out2.Usage.InputTokens <= sp.Usage.InputTokens || out2.Usage.ModelCalls != sp.Usage.ModelCalls+2 {
		t.Errorf("usage after resuming = %+v, want turns 8 and the first run's tokens and calls added", out2.Usage)
	}
}

// What earlier attempts spent counts against the limits.
func TestSpentCountsAgainstLimits(t *testing.T) {
	r, m := newRun(memenv.New(nil), busy(3)...)
	r.Limits = agent.Limits{MaxTokens: 1000}
	r.Spent = task.Usage{InputTokens: 900, OutputTokens: 100, Turns: 40}
	out, err := agent.New(agent.Config{}).Run(context.Background(), r)
	if err != nil || out.Reason != agent.StopMaxTokens || len(m.requests()) != 0 {
		t.Fatalf("outcome %v after %d calls (%v), want max_tokens before any call", out.Reason, len(m.requests()), err)
	}
	if out.Usage.InputTokens != 900 || out.Usage.Turns != 0 {
		t.Errorf("usage = %+v, want the spent tokens and no turns", out.Usage)
	}
}

func turnsOf(sps []agent.SavePoint) []int {
	var out []int
	for _, sp := range sps {
		out = append(out, sp.Turn)
	}
	return out
}
