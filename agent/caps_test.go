package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/task"
)

// A hostile model's reply with 10,000 tool calls: only the first
// MaxCallsPerReply run, one error observation answers for the rest, and the
// history keeps only those calls.
func TestHostileModel_TenThousandCallsInOneReply(t *testing.T) {
	const n = 10_000
	many := make([]agent.ToolCall, n)
	for i := range many {
		many[i] = call("bash", map[string]any{"command": fmt.Sprintf("echo %d", i)})
	}
	env := memenv.New(nil)
	r, m := newRun(env, calls(many...), finish("ok"))
	r.Task.TestCommand = ""
	var rec recorder
	r.OnEvent = rec.on
	out, err := agent.New(agent.Config{}).Run(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if ran := len(env.Commands()); ran != agent.DefaultMaxCallsPerReply {
		t.Errorf("%d commands ran, want %d", ran, agent.DefaultMaxCallsPerReply)
	}
	if out.Reason != agent.StopFinished {
		t.Errorf("reason %s", out.Reason)
	}
	reqs := m.requests()
	if len(reqs) < 2 {
		t.Fatalf("%d model requests; the run ended with %s: %v", len(reqs), out.Reason, out.Err)
	}
	var asked, answers int
	refusal := ""
	for _, msg := range reqs[1].Messages {
		asked += len(msg.ToolCalls)
		if msg.Role == agent.RoleTool {
			answers++
			refusal = msg.Content
		}
	}
	if want := agent.DefaultMaxCallsPerReply + 1; asked != want || answers != want || !strings.Contains(refusal, "at most 32 run per reply") {
		t.Errorf("history: %d calls, %d answers, last %q; want %d of each and the refusal", asked, answers, refusal, want)
	}
	if ev := len(rec.of(task.EventToolResult)); ev > agent.DefaultMaxCallsPerReply+2 { // + the refusal and finish
		t.Errorf("%d tool_result events for one reply: the refused calls should not flood the event stream", ev)
	}
}

// A call with more arguments than MaxToolArgBytes does not run; its
// arguments leave the history and the events.
func TestHostileModel_OversizedToolArguments(t *testing.T) {
	big := strings.Repeat("x", agent.DefaultMaxToolArgBytes+1)
	env := memenv.New(nil)
	r, m := newRun(env, calls(call("write", map[string]any{"path": "big.txt", "content": big}), call("bash", map[string]any{"command": "echo hi"})), finish("ok"))
	r.Task.TestCommand = ""
	var rec recorder
	r.OnEvent = rec.on
	out, err := agent.New(agent.Config{}).Run(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := env.File("big.txt"); ok {
		t.Error("the oversized write ran")
	}
	if len(env.Commands()) != 1 {
		t.Errorf("the call after the oversized one did not run: %v", env.Commands())
	}
	reqs := m.requests()
	if len(reqs) < 2 {
		t.Fatalf("%d model requests; the run ended with %s: %v", len(reqs), out.Reason, out.Err)
	}
	var args int
	refusal := false
	for _, msg := range reqs[1].Messages {
		for _, c := range msg.ToolCalls {
			args += len(c.Arguments)
		}
		refusal = refusal || msg.Role == agent.RoleTool && strings.Contains(msg.Content, "over the cap of 1048576")
	}
	if args > 1000 || !refusal {
		t.Errorf("history carries %d bytes of arguments; refusal told: %v", args, refusal)
	}
	for _, e := range rec.events {
		if len(e.Text) > 1<<20 {
			t.Fatalf("a %s event carries %d bytes", e.Kind, len(e.Text))
		}
	}
}
