package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/task"
)

// firstRequest runs r to its end and returns the first request's messages.
func firstRequest(t *testing.T, cfg agent.Config, r *agent.Run, m *fakeModel) []agent.Message {
	t.Helper()
	if _, err := agent.New(cfg).Run(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return m.requests()[0].Messages
}

func TestSystemPromptLayers(t *testing.T) {
	files := map[string]string{"AGENTS.md": "Run `make lint` before finishing.\n", ".wrench/instructions.md": "Use tabs.\n"}
	t.Run("rules, project, environment, operator", func(t *testing.T) {
		r, m := newRun(memenv.New(files), finish("ok"))
		r.Verify = agent.VerifyNever
		sys := firstRequest(t, agent.Config{Prompts: agent.PromptSet{Append: "Operator says: be careful with {{.TaskID}}."}}, r, m)[0].Content
		order := []string{"Rules:", `<project_instructions path="AGENTS.md">`, "Run `make lint` before finishing.", `<project_instructions path=".wrench/instructions.md">`, "Use tabs.", "<environment>", "Operator says: be careful with t-1."}
		if strings.Contains(sys, "\n\n\n") {
			t.Errorf("layers are not separated by exactly one blank line:\n%s", sys)
		}
		rest := sys
		for _, s := range order {
			i := strings.Index(rest, s)
			if i < 0 {
				t.Fatalf("system prompt lacks %q after the earlier layers:\n%s", s, sys)
			}
			rest = rest[i+len(s):]
		}
	})
	t.Run("project layer off", func(t *testing.T) {
		r, m := newRun(memenv.New(files), finish("ok"))
		r.Verify = agent.VerifyNever
		sys := firstRequest(t, agent.Config{NoProjectInstructions: true}, r, m)[0].Content
		if strings.Contains(sys, "make lint") || strings.Contains(sys, "project_instructions") {
			t.Errorf("project instructions present:\n%s", sys)
		}
	})
	t.Run("the repository names its own files", func(t *testing.T) {
		env := memenv.New(map[string]string{"AGENTS.md": "generic\n", "docs/agents.md": "Prefer small commits.\n"})
		r, m := newRun(env, finish("ok"))
		r.Verify, r.ProjectInstructions = agent.VerifyNever, []string{"docs/agents.md"}
		sys := firstRequest(t, agent.Config{}, r, m)[0].Content
		if !strings.Contains(sys, `<project_instructions path="docs/agents.md">`) || strings.Contains(sys, "generic") {
			t.Errorf("the run's instruction files were not used:\n%s", sys)
		}
	})
	t.Run("no files, no layer", func(t *testing.T) {
		r, m := newRun(memenv.New(nil), finish("ok"))
		r.Verify = agent.VerifyNever
		if sys := firstRequest(t, agent.Config{}, r, m)[0].Content; strings.Contains(sys, "project_instructions") || strings.Contains(sys, "\n\n\n") {
			t.Errorf("empty layer rendered:\n%s", sys)
		}
	})
	t.Run("long file is cut", func(t *testing.T) {
		r, m := newRun(memenv.New(map[string]string{"AGENTS.md": strings.Repeat("rule\n", 5000)}), finish("ok"))
		r.Verify = agent.VerifyNever
		sys := firstRequest(t, agent.Config{}, r, m)[0].Content
		if len(sys) > 12_000 || !strings.Contains(sys, "view AGENTS.md for the rest") {
			t.Errorf("system prompt is %d characters", len(sys))
		}
	})
}

func TestSearchReplaceExampleInPrompt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mode    task.Mode
		allowed []string
		want    bool
	}{
		{"offered", task.ModeNormal, nil, true},
		{"plan mode", task.ModePlan, nil, false},
		{"not allowlisted", task.ModeNormal, []string{"edit", "view"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, m := newRun(memenv.New(nil), finish("ok"))
			r.Verify, r.Mode, r.AllowedTools = agent.VerifyNever, tc.mode, tc.allowed
			sys := firstRequest(t, agent.Config{}, r, m)[0].Content
			has := strings.Contains(sys, `search_replace {"path": "src/utils.ts", "diff": "------- SEARCH\nexport function add`) && strings.Contains(sys, "+++++++ REPLACE")
			if has != tc.want {
				t.Errorf("example present = %v:\n%s", has, sys)
			}
		})
	}
}

func TestAtMentionsBringFilesIntoTheTask(t *testing.T) {
	big := strings.Repeat("filler line\n", 2000)
	env := memenv.New(map[string]string{"calc.go": calcGo, "pkg/a.go": "package pkg\n", "big.txt": big})
	r, m := newRun(env,
		calls(edit("calc.go", "a - b", "a + b"), edit("big.txt", "filler line\n", "")),
		finish("ok"),
	)
	r.Task.TestCommand = ""
	r.Task.Instruction = "Fix @calc.go (see @pkg/ and @big.txt). Thanks @octocat, mail me at me@example.com."
	out, err := agent.New(agent.Config{}).Run(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	inst := m.requests()[0].Messages[1].Content
	for _, want := range []string{"<file path=\"calc.go\">\n" + calcGo + "</file>", "<directory path=\"pkg\">\na.go\n</directory>", "<file path=\"big.txt\">\nfiller line", "only the start of big.txt is shown"} {
		if !strings.Contains(inst, want) {
			t.Errorf("instance lacks %q:\n%.600s", want, inst)
		}
	}
	if strings.Contains(inst, "octocat\"") || strings.Contains(inst, "example.com\"") || len(inst) > 13_000 {
		t.Errorf("instance mentions too much (%d chars)", len(inst))
	}
	// A file shown whole counts as viewed; a cut one does not.
	res := toolResults(out.Messages)
	if !strings.HasPrefix(res[0].Content, "Edited calc.go") || !strings.Contains(res[1].Content, "has not been read") {
		t.Errorf("results: %q / %q", res[0].Content, res[1].Content)
	}
}

func TestHistoryRestartsAtTheLatestSummary(t *testing.T) {
	hist := []agent.Message{
		{Role: agent.RoleSystem, Content: "sys"},
		{Role: agent.RoleUser, Content: "task"},
		{Role: agent.RoleAssistant, Content: "old turn"},
		{Role: agent.RoleUser, Content: "Summary 1", Summary: true},
		{Role: agent.RoleAssistant, Content: "older turn"},
		{Role: agent.RoleUser, Content: "Summary 2", Summary: true},
		{Role: agent.RoleAssistant, Content: "recent turn"},
		{Role: agent.RoleUser, Content: "Go on."},
	}
	r, m := newRun(memenv.New(nil), finish("ok"))
	r.Verify = agent.VerifyNever
	r.History = hist
	var got []string
	for _, msg := range firstRequest(t, agent.Config{}, r, m) {
		got = append(got, msg.Content)
	}
	if want := "sys|task|Summary 2|recent turn|Go on."; strings.Join(got, "|") != want {
		t.Errorf("history sent: %q, want %q", got, want)
	}
}
