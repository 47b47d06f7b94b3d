package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

func TestParseTextActions(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"one", "THOUGHT: look\n\n```bash\nls -la\n```", []string{"ls -la"}},
		{"trailing spaces after bash", "```bash   \n  cat a  \n```\n", []string{"cat a"}},
		{"multi-line", "```bash\ncd x &&\n  make\n```", []string{"cd x &&\n  make"}},
		{"two blocks", "```bash\na\n```\n```bash\nb\n```", []string{"a", "b"}},
		{"sh is not bash", "```sh\nls\n```", nil},
		{"Bash is not bash", "```Bash\nls\n```", nil},
		{"plain fence", "```\nls\n```", nil},
		{"closing fence must start a line", "```bash\necho ```\n```", []string{"echo ```"}},
		{"unclosed", "```bash\nls", nil},
	} {
		if got := agent.ParseTextActions(tc.in); strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestTextCompletion(t *testing.T) {
	for _, tc := range []struct {
		out   string
		code  int
		final string
		ok    bool
	}{
		{"COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\ndiff --git a/x b/x\n", 0, "diff --git a/x b/x\n", true},
		{"\n  COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT  \n", 0, "", true},
		{"COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n", 1, "", false},
		{"diff\nCOMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n", 0, "", false},
		{"NANO_SWE_AGENT_FINAL_OUTPUT\n", 0, "", false},
	} {
		final, ok := agent.TextCompletion(tc.out, tc.code)
		if final != tc.final || ok != tc.ok {
			t.Errorf("TextCompletion(%q, %d) = %q, %v", tc.out, tc.code, final, ok)
		}
	}
}

func TestTextObservation(t *testing.T) {
	got := agent.TextObservation(sandbox.ExecResult{ExitCode: 1, Output: []byte("boom\n")}, 0, 100)
	if got != "<returncode>1</returncode>\n<output>\nboom\n</output>" {
		t.Errorf("short = %q", got)
	}
	long := agent.TextObservation(sandbox.ExecResult{Output: []byte("H" + strings.Repeat("x", 300) + "T")}, 0, 100)
	for _, want := range []string{"<warning>", "too long", "<output_head>\nH", "<elided_chars>\n202 characters elided", "T\n</output_tail>"} {
		if !strings.Contains(long, want) {
			t.Errorf("long lacks %q:\n%s", want, long)
		}
	}
}

func TestTextProtocolRun(t *testing.T) {
	env := memenv.New(map[string]string{"a.txt": "hello\n"})
	env.Handle("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		return sandbox.ExecResult{Output: []byte("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\nthe diff\n")}, nil
	})
	r, m := newRun(env,
		text("THOUGHT: read it\n\n```bash\ncat a.txt\n```"),
		text("I think I am done."),
		text("```bash\na\n```\n```bash\nb\n```"),
		text("THOUGHT: submit\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached\n```"),
	)
	r.Protocol = task.ProtocolText
	r.Task.TestCommand = ""
	out, err := agent.New(agent.Config{}).Run(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if out.Reason != agent.StopFinished || out.Summary != "the diff\n" {
		t.Fatalf("reason %s summary %q", out.Reason, out.Summary)
	}
	reqs := m.requests()
	if len(reqs[0].Tools) != 0 || !strings.Contains(reqs[0].Messages[0].Content, "exactly ONE bash code block") {
		t.Errorf("text protocol request: %d tools, system %q", len(reqs[0].Tools), reqs[0].Messages[0].Content)
	}
	if got := lastUser(reqs[1].Messages); got != "<returncode>0</returncode>\n<output>\nhello\n</output>" {
		t.Errorf("observation = %q", got)
	}
	if got := lastUser(reqs[2].Messages); !strings.Contains(got, "found 0 actions") {
		t.Errorf("format error = %q", got)
	}
	if got := lastUser(reqs[3].Messages); !strings.Contains(got, "found 2 actions") {
		t.Errorf("format error = %q", got)
	}
	if got := env.Commands(); len(got) != 2 {
		t.Errorf("commands = %q", got)
	}
}

func TestTextProtocolFormatErrorsEndTheRun(t *testing.T) {
	r, _ := newRun(memenv.New(nil), text("no block"), text("```sh\nls\n```"), text("still none"), text("```bash\nls\n```"))
	r.Protocol = task.ProtocolText
	out, _ := agent.New(agent.Config{}).Run(context.Background(), r)
	if out.Reason != agent.StopFormatErrors {
		t.Errorf("reason = %s", out.Reason)
	}
}

func TestTextProtocolVerifiesOnSubmit(t *testing.T) {
	env := memenv.New(nil)
	fixed := false
	env.Handle("fix", func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		fixed = true
		return sandbox.ExecResult{}, nil
	})
	env.Handle("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		return sandbox.ExecResult{Output: []byte("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n")}, nil
	})
	testCommand(env, "go test ./...", func() (int, string) {
		if fixed {
			return 0, "ok\n"
		}
		return 1, "--- FAIL: TestX\n"
	})
	submit := text("```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```")
	r, m := newRun(env, submit, text("```bash\nfix\n```"), submit)
	r.Protocol = task.ProtocolText
	out, _ := agent.New(agent.Config{}).Run(context.Background(), r)
	if out.Reason != agent.StopFinished || out.LastTestRun == nil || !out.LastTestRun.Passed {
		t.Fatalf("reason %s, last test %+v", out.Reason, out.LastTestRun)
	}
	if got := lastUser(m.requests()[1].Messages); !strings.Contains(got, "Not finished") || !strings.Contains(got, "--- FAIL: TestX") {
		t.Errorf("refusal = %q", got)
	}
}
