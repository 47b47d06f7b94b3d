package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/sandbox"
)

func TestPromptsCarryRulesTaskAndEnvironment(t *testing.T) {
	now := func() time.Time { return time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC) }
	r, m := newRun(memenv.New(nil), finish("ok"))
	r.Verify = agent.VerifyNever
	if _, err := agent.New(agent.Config{Now: now}).Run(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	msgs := m.requests()[0].Messages
	sys, inst := msgs[0].Content, msgs[1].Content
	for _, want := range []string{"keep going until the task is solved", "Read before you edit", "Do not commit", "call finish",
		"Workspace: /workspace", "Git repository: branch main, clean", "Platform: Linux x86_64", "Date: 2026-03-04", "Test command: go test ./..."} {
		if !strings.Contains(sys, want) {
			t.Errorf("system prompt lacks %q", want)
		}
	}
	for _, want := range []string{"<task>\nFix Add.\n</task>", "Recommended workflow", "reproduces the issue", "(`go test ./...`)", "6. Call finish"} {
		if !strings.Contains(inst, want) {
			t.Errorf("instance prompt lacks %q:\n%s", want, inst)
		}
	}
}

func TestEnvironmentIsProbedWhenNotGiven(t *testing.T) {
	env := memenv.New(nil)
	env.Fallback(func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		if strings.Contains(req.Command, "git rev-parse") {
			return sandbox.ExecResult{Output: []byte("git: branch dev, 2 changed files\nos: Linux aarch64\n")}, nil
		}
		return sandbox.ExecResult{ExitCode: 127}, nil
	})
	r, m := newRun(env, finish("ok"))
	r.EnvInfo = nil
	r.Verify = agent.VerifyNever
	if _, err := agent.New(agent.Config{}).Run(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	sys := m.requests()[0].Messages[0].Content
	if !strings.Contains(sys, "Git repository: branch dev, 2 changed files") || !strings.Contains(sys, "Platform: Linux aarch64") {
		t.Errorf("probe not used:\n%s", sys)
	}
}

func TestPromptOverrides(t *testing.T) {
	set, err := agent.LoadPromptSet(fstest.MapFS{
		"system.tmpl":   {Data: []byte("Custom role for {{.TaskID}}.")},
		"instance.tmpl": {Data: []byte("Do: {{.Task}}")},
	})
	if err != nil {
		t.Fatal(err)
	}
	r, m := newRun(memenv.New(nil), finish("ok"))
	r.Verify = agent.VerifyNever
	if _, err := agent.New(agent.Config{Prompts: set}).Run(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	msgs := m.requests()[0].Messages
	if !strings.HasPrefix(msgs[0].Content, "Custom role for t-1.\n\n<environment>") || msgs[1].Content != "Do: Fix Add." {
		t.Errorf("overrides not used: %q / %q", msgs[0].Content, msgs[1].Content)
	}
}

func TestPromptErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  agent.PromptSet
		// Validate names the template and what is wrong, so `wrench run`
		// and `serve` refuse a bad --prompts directory at start.
		says string
	}{
		{"missing key", agent.PromptSet{Instance: "Solve {{.Tsk}}"}, `prompt instance: template: instance:1:8: executing "instance" at <.Tsk>: map has no entry for key "Tsk"`},
		{"missing key in environment", agent.PromptSet{Environment: "{{.Shell}}"}, `map has no entry for key "Shell"`},
		{"missing key behind a condition", agent.PromptSet{System: "{{if .PlanMode}}{{.Plan}}{{end}}"}, `map has no entry for key "Plan"`},
		{"missing key when a flag is off", agent.PromptSet{Append: "{{if not .TextMode}}{{.Protocol}}{{end}}"}, `map has no entry for key "Protocol"`},
		{"bad syntax", agent.PromptSet{System: "{{if}}"}, "prompt system"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := agent.New(agent.Config{Prompts: tc.set})
			if err := a.Validate(); err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("Validate = %v, want %q", err, tc.says)
			}
			r, m := newRun(memenv.New(nil), finish("ok"))
			_, err := a.Run(context.Background(), r)
			if !errors.Is(err, agent.ErrInvalidRun) {
				t.Errorf("Run err = %v", err)
			}
			if len(m.requests()) != 0 {
				t.Errorf("the model was called")
			}
		})
	}
}
