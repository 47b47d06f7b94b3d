package agent_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/task"
)

// fuzzConfig keeps every command short (memenv's sleep honours timeouts)
// and offers every tool.
var fuzzConfig = agent.Config{
	CommandTimeout:    time.Millisecond,
	MaxCommandTimeout: time.Millisecond,
	CodeSearch:        true,
	SubAgents:         agent.SubAgentConfig{Enabled: true, MaxTurns: 2},
}

func fuzzEnv() *memenv.Env {
	return memenv.New(map[string]string{"calc.go": calcGo, "dir/a.txt": "a\nb\n"})
}

// textCorpus returns the recorded text-mode replies, when the conformance
// data is present (fuzz seeds must not fail without it).
func textCorpus() []string {
	files, _ := filepath.Glob(filepath.Join("..", "..", "shared", "conformance", "text-mode", "*.json"))
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var c textConformance
		if json.Unmarshal(b, &c) != nil {
			continue
		}
		for _, turn := range c.Turns {
			out = append(out, turn.Assistant)
		}
	}
	return out
}

// FuzzToolCall sends one arbitrary call (name and raw arguments) through a
// run: whatever the model sends, Run must not panic or fail, and every
// call gets exactly one result, in order, tied by id.
func FuzzToolCall(f *testing.F) {
	for _, c := range []agent.ToolCall{
		view("calc.go"), edit("calc.go", "a - b", "a + b"), call("bash", map[string]any{"command": "sleep 5", "timeout_s": 100}),
		call("patch", map[string]any{"patch_text": "*** Begin Patch\n*** Delete File: calc.go\n*** End Patch"}),
		call("search_replace", map[string]any{"path": "dir/a.txt", "diff": "------- SEARCH\na\n=======\nb\n+++++++ REPLACE"}),
		call("grep", map[string]any{"pattern": "(", "path": "../x"}), call("glob", map[string]any{"pattern": "**/*"}),
		call("search", map[string]any{"query": "Add calc"}), call("research", map[string]any{"question": "where?"}),
		call("write", map[string]any{"path": "/workspace/n.txt", "content": "x"}), call("ls", map[string]any{"path": "/etc"}),
		{Name: "finish", Arguments: `{"summary": 3}`}, {Name: "edit", Arguments: `{"path":`}, {Name: "", Arguments: ""},
	} {
		f.Add(c.Name, c.Arguments)
	}
	f.Fuzz(func(t *testing.T, name, arguments string) {
		r, _ := newRun(fuzzEnv(), calls(agent.ToolCall{Name: name, Arguments: arguments}, view("calc.go")), finish("done"))
		r.Task.TestCommand = ""
		out, err := agent.New(fuzzConfig).Run(context.Background(), r)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		checkResultsPaired(t, out.Messages)
	})
}

// FuzzTextReply sends one arbitrary text-protocol reply through a run.
func FuzzTextReply(f *testing.F) {
	f.Add("THOUGHT: x\n\n```bash\ncat calc.go\n```")
	f.Add("```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```")
	f.Add("<file-edit filePath=\"calc.go\">\n------- SEARCH\nx\n=======\ny\n+++++++ REPLACE\n</file-edit>")
	for _, c := range textCorpus() {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, content string) {
		for _, protocol := range []task.Protocol{task.ProtocolText, task.ProtocolTools} {
			r, _ := newRun(fuzzEnv(), text(content), text("```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"))
			r.Protocol = protocol
			r.Task.TestCommand = ""
			out, err := agent.New(fuzzConfig).Run(context.Background(), r)
			if err != nil || out == nil {
				t.Fatalf("Run: %v", err)
			}
			checkResultsPaired(t, out.Messages)
		}
	})
}

// checkResultsPaired checks that each assistant message's calls are
// answered by exactly as many tool messages, in order, with the same ids.
func checkResultsPaired(t *testing.T, msgs []agent.Message) {
	t.Helper()
	for i, m := range msgs {
		if m.Role != agent.RoleAssistant || len(m.ToolCalls) == 0 {
			continue
		}
		for j, c := range m.ToolCalls {
			k := i + 1 + j
			if k >= len(msgs) || msgs[k].Role != agent.RoleTool || msgs[k].ToolCallID != c.ID {
				t.Fatalf("call %d (%s %q) of message %d has no result in place", j, c.Name, c.ID, i)
			}
		}
	}
}
