package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/memenv"
)

func TestDuplicateCallIDsAreMadeUnique(t *testing.T) {
	a, b := call("bash", map[string]any{"command": "echo a"}), call("bash", map[string]any{"command": "echo b"})
	a.ID, b.ID = "call_0", "call_0"
	r, _ := newRun(memenv.New(nil), calls(a, b), finish("ok"))
	r.Task.TestCommand = ""
	out, _ := agent.New(agent.Config{}).Run(context.Background(), r)
	asst := out.Messages[2]
	res := toolResults(out.Messages)
	if asst.ToolCalls[0].ID == asst.ToolCalls[1].ID || res[0].ToolCallID != asst.ToolCalls[0].ID || res[1].ToolCallID != asst.ToolCalls[1].ID {
		t.Errorf("ids %q %q, results %q %q", asst.ToolCalls[0].ID, asst.ToolCalls[1].ID, res[0].ToolCallID, res[1].ToolCallID)
	}
}

func TestHistoryContinuesARun(t *testing.T) {
	env := memenv.New(nil)
	r, _ := newRun(env, text("Paused."))
	r.Task.TestCommand = ""
	first, _ := agent.New(agent.Config{}).Run(context.Background(), r)
	r2, m := newRun(env, finish("resumed"))
	r2.Task.TestCommand = ""
	r2.History = append(first.Messages, agent.Message{Role: agent.RoleUser, Content: "Go on."})
	out, _ := agent.New(agent.Config{}).Run(context.Background(), r2)
	msgs := m.requests()[0].Messages
	if out.Reason != agent.StopFinished || len(msgs) != 4 || msgs[0].Role != agent.RoleSystem || msgs[3].Content != "Go on." {
		t.Errorf("reason %s, history sent %+v", out.Reason, msgs)
	}
}

func TestFileEditBlocksInTextBecomeSearchReplaceCalls(t *testing.T) {
	env := memenv.New(map[string]string{"calc.go": calcGo})
	r, _ := newRun(env,
		calls(view("calc.go")),
		text("<chat>I will fix Add.</chat>\n<file-edit filePath=\"calc.go\">\n------- SEARCH\n\treturn a - b\n=======\n\treturn a + b\n+++++++ REPLACE\n</file-edit>"),
		finish("fixed"),
	)
	r.Task.TestCommand = ""
	out, _ := agent.New(agent.Config{}).Run(context.Background(), r)
	if got, _ := env.File("calc.go"); out.Reason != agent.StopFinished || !strings.Contains(got, "return a + b") {
		t.Fatalf("reason %s, calc.go %q", out.Reason, got)
	}
	asst := out.Messages[4]
	res := toolResults(out.Messages)
	if len(asst.ToolCalls) != 1 || asst.ToolCalls[0].Name != "search_replace" || res[1].ToolCallID != asst.ToolCalls[0].ID || !strings.HasPrefix(res[1].Content, "Edited calc.go: +1 -1") {
		t.Errorf("assistant %+v, result %+v", asst, res[1])
	}
	// Without search_replace the reply is an ordinary last word.
	env = memenv.New(map[string]string{"calc.go": calcGo})
	r, _ = newRun(env, text("<file-edit filePath=\"calc.go\">\n------- SEARCH\nx\n=======\ny\n+++++++ REPLACE\n</file-edit>"))
	r.AllowedTools = []string{"view"}
	r.Task.TestCommand = ""
	if out, _ := agent.New(agent.Config{}).Run(context.Background(), r); out.Reason != agent.StopNoToolCalls {
		t.Errorf("reason %s", out.Reason)
	}
}
