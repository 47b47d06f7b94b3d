package agent_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

const calcGo = "package calc\n\nfunc Add(a, b int) int {\n\treturn a - b\n}\n"

func TestRunFixesBug(t *testing.T) {
	env := memenv.New(map[string]string{"calc.go": calcGo})
	testCommand(env, "go test ./...", func() (int, string) {
		if src, _ := env.File("calc.go"); strings.Contains(src, "a + b") {
			return 0, "ok  \tcalc\t0.002s\n"
		}
		return 1, "--- FAIL: TestAdd (0.00s)\n    calc_test.go:6: Add(1, 2) = -1, want 3\nFAIL\n"
	})
	r, m := newRun(env,
		calls(call("bash", map[string]any{"command": "go test ./..."})),
		calls(call("view", map[string]any{"path": "calc.go"})),
		calls(call("edit", map[string]any{"path": "calc.go", "old_string": "return a - b", "new_string": "return a + b"})),
		finish("Add adds."),
	)
	out, err := agent.New(agent.Config{}).Run(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if out.Reason != agent.StopFinished {
		t.Fatalf("reason = %s (%v)", out.Reason, out.Err)
	}
	if got, _ := env.File("calc.go"); !strings.Contains(got, "return a + b") {
		t.Errorf("calc.go = %q", got)
	}
	res := toolResults(out.Messages)
	if len(res) != 4 {
		t.Fatalf("%d tool results", len(res))
	}
	if !strings.Contains(res[0].Content, "Exit code: 1 (error class: assertion)") {
		t.Errorf("bash result = %q", res[0].Content)
	}
	if !strings.Contains(res[2].Content, "-\treturn a - b") || !strings.Contains(res[2].Content, "+1 -1") {
		t.Errorf("edit result = %q", res[2].Content)
	}
	if len(m.requests()) != 4 {
		t.Errorf("%d model calls", len(m.requests()))
	}
}

func TestSeveralCallsRunInOrderAndAllResultsGoBack(t *testing.T) {
	env := memenv.New(map[string]string{"a.txt": "A\n"})
	r, m := newRun(env,
		calls(call("bash", map[string]any{"command": "echo one"}), view("a.txt"), call("bash", map[string]any{"command": "echo three"})),
		finish("done"),
	)
	r.Task.TestCommand = ""
	out, err := agent.New(agent.Config{}).Run(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if got := env.Commands(); len(got) != 2 || got[0] != "echo one" || got[1] != "echo three" {
		t.Errorf("commands = %q", got)
	}
	// The second request holds the assistant message and its three results,
	// in order, tied by call id.
	req := m.requests()[1].Messages
	n := len(req)
	if req[n-4].Role != agent.RoleAssistant || len(req[n-4].ToolCalls) != 3 {
		t.Fatalf("assistant message = %+v", req[n-4])
	}
	for i, want := range []string{"one", "A", "three"} {
		msg := req[n-3+i]
		if msg.Role != agent.RoleTool || msg.ToolCallID != req[n-4].ToolCalls[i].ID || !strings.Contains(msg.Content, want) {
			t.Errorf("result %d = %+v", i, msg)
		}
	}
	if out.Reason != agent.StopFinished || out.Summary != "done" || out.Usage.ToolCalls != 4 || out.Usage.Turns != 2 {
		t.Errorf("outcome = %+v", out)
	}
}

func TestCallsAfterFinishAreNotRun(t *testing.T) {
	env := memenv.New(nil)
	r, _ := newRun(env, calls(call("finish", map[string]any{"summary": "s"}), call("bash", map[string]any{"command": "echo late"})))
	r.Task.TestCommand = ""
	out, _ := agent.New(agent.Config{}).Run(context.Background(), r)
	res := toolResults(out.Messages)
	if out.Reason != agent.StopFinished || len(env.Commands()) != 0 || len(res) != 2 || !strings.Contains(res[1].Content, "Not run: finish was called") {
		t.Errorf("reason %s, commands %q, results %+v", out.Reason, env.Commands(), res)
	}
}

func TestEventsAndStreaming(t *testing.T) {
	env := memenv.New(nil)
	streamed := calls(call("bash", map[string]any{"command": "echo hi"}))
	streamed.resp.Message.Content = "Running it."
	streamed.resp.Message.Thinking = "hmm"
	streamed.stream = []agent.StreamEvent{
		{Kind: agent.StreamThinking, Text: "hm"}, {Kind: agent.StreamThinking, Text: "m"},
		{Kind: agent.StreamText, Text: "Running "}, {Kind: agent.StreamText, Text: "it."},
		{Kind: agent.StreamToolCallStart, Index: 0, ID: "c0_bash", Name: "bash"},
		{Kind: agent.StreamToolCallArgs, Index: 0, Text: `{"command":`}, {Kind: agent.StreamToolCallArgs, Index: 0, Text: `"echo hi"}`},
		{Kind: agent.StreamToolCallEnd, Index: 0},
	}
	for _, tc := range []struct {
		name         string
		streamEvents bool
		content      []string
		thinking     []string
	}{
		{"coalesced", false, []string{"Running it."}, []string{"hmm"}},
		{"deltas", true, []string{"Running ", "it."}, []string{"hm", "m"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			var raw []agent.StreamEvent
			r, _ := newRun(env, streamed, finish("ok"))
			r.Task.TestCommand = ""
			r.OnEvent = rec.on
			r.StreamEvents = tc.streamEvents
			r.OnStream = func(ev agent.StreamEvent) { raw = append(raw, ev) }
			if _, err := agent.New(agent.Config{}).Run(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			var content, thinking []string
			for _, e := range rec.of(task.EventContent) {
				content = append(content, e.Text)
			}
			for _, e := range rec.of(task.EventThinking) {
				thinking = append(thinking, e.Text)
			}
			if !slices.Equal(content, tc.content) || !slices.Equal(thinking, tc.thinking) {
				t.Errorf("content %q thinking %q", content, thinking)
			}
			if len(raw) != len(streamed.stream) || raw[4].Kind != agent.StreamToolCallStart || raw[4].Name != "bash" {
				t.Errorf("raw stream = %+v", raw)
			}
			// Order within the first turn: turn, thinking/content, usage,
			// tool_call, tool_result.
			kinds := rec.kinds()
			want := []task.EventKind{task.EventTurn, task.EventUsage, task.EventToolCall, task.EventToolResult, task.EventTurn}
			var got []task.EventKind
			for _, k := range kinds {
				if slices.Contains(want, k) {
					got = append(got, k)
				}
			}
			if !slices.Equal(got[:5], want) {
				t.Errorf("event order = %v", got)
			}
			for i, e := range rec.events {
				if e.TaskID != "t-1" || e.Seq != uint64(i+1) {
					t.Fatalf("event %d = %+v", i, e)
				}
			}
			if u := rec.of(task.EventUsage)[0]; u.Usage == nil || u.Usage.InputTokens != 100 || u.Model != "scripted" {
				t.Errorf("usage event = %+v", u)
			}
		})
	}
}

func TestMalformedCallsAreFormatErrors(t *testing.T) {
	bad := []agent.ToolCall{
		{Name: "bash", Arguments: `{"command": "echo`},
		{Name: "frobnicate", Arguments: `{}`},
		{Name: "edit", Arguments: `{"path": "x.go"}`},
		{Name: "view", Arguments: `{"path": 7}`},
	}
	wantText := []string{"not a JSON object", `unknown tool "frobnicate"`, "missing required argument(s): old_string, new_string", "do not fit its schema"}
	t.Run("each is fed back and the loop goes on", func(t *testing.T) {
		var replies []reply
		for _, c := range bad {
			replies = append(replies, calls(c), calls(call("bash", map[string]any{"command": "true"})))
		}
		r, _ := newRun(memenv.New(nil), append(replies, finish("ok"))...)
		r.Task.TestCommand = ""
		out, _ := agent.New(agent.Config{}).Run(context.Background(), r)
		if out.Reason != agent.StopFinished {
			t.Fatalf("reason = %s", out.Reason)
		}
		res := toolResults(out.Messages)
		for i, want := range wantText {
			if !strings.Contains(res[2*i].Content, want) || !strings.HasPrefix(res[2*i].Content, "Error: ") {
				t.Errorf("result for %s = %q", bad[i].Name, res[2*i].Content)
			}
		}
	})
	t.Run("consecutive ones end the run", func(t *testing.T) {
		var rec recorder
		env := memenv.New(nil)
		r, m := newRun(env, calls(call("write", map[string]any{"path": "kept.txt", "content": "partial"})), calls(bad[0]), calls(bad[1]), calls(bad[2]), finish("never"))
		r.Task.TestCommand = ""
		r.OnEvent = rec.on
		out, _ := agent.New(agent.Config{}).Run(context.Background(), r)
		if out.Reason != agent.StopFormatErrors || len(m.requests()) != 4 {
			t.Errorf("reason %s after %d calls", out.Reason, len(m.requests()))
		}
		if got, _ := env.File("kept.txt"); got != "partial" {
			t.Errorf("partial work lost: %q", got)
		}
		if l := rec.of(task.EventLimit); len(l) != 1 || l[0].Text != "format_errors" {
			t.Errorf("limit events = %+v", l)
		}
	})
}

func TestPlanModeAndAllowlist(t *testing.T) {
	specs, err := agent.Tools(task.ModePlan, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"view", "ls", "glob", "grep", "finish"}) {
		t.Errorf("plan tools = %v", names)
	}
	specs, _ = agent.Tools(task.ModeNormal, []string{"bash", "view"})
	if len(specs) != 3 || specs[2].Name != "finish" {
		t.Errorf("allowlisted tools = %+v", specs)
	}
	if _, err := agent.Tools(task.ModeNormal, []string{"rm"}); !errors.Is(err, agent.ErrInvalidRun) {
		t.Errorf("unknown allowlisted tool: %v", err)
	}

	env := memenv.New(map[string]string{"a.go": "x\n"})
	r, m := newRun(env, calls(view("a.go"), edit("a.go", "x", "y"), call("bash", map[string]any{"command": "echo hi"})), finish("plan: change x to y"))
	r.Mode = task.ModePlan
	out, err := agent.New(agent.Config{}).Run(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(m.requests()[0].Tools); got != 5 {
		t.Errorf("plan mode offered %d tools", got)
	}
	res := toolResults(out.Messages)
	if !strings.Contains(res[1].Content, `tool "edit" is not available`) || !strings.Contains(res[2].Content, `tool "bash" is not available`) {
		t.Errorf("results = %q / %q", res[1].Content, res[2].Content)
	}
	if got, _ := env.File("a.go"); got != "x\n" || len(env.Commands()) != 0 {
		t.Errorf("plan mode changed something: %q %q", got, env.Commands())
	}
	if !strings.Contains(m.requests()[0].Messages[0].Content, "plan mode") {
		t.Errorf("system prompt does not mention plan mode")
	}
}

func TestIncompleteIntentIsNudgedAtMostTwice(t *testing.T) {
	for _, tc := range []struct {
		name    string
		replies []reply
		reason  agent.StopReason
		nudges  int
	}{
		{"colon, then acts", []reply{text("I will look at the file:"), finish("ok")}, agent.StopFinished, 1},
		{"let me, three times", []reply{text("Let me check the tests."), text("Let me check the tests."), text("Let me check the tests."), finish("never")}, agent.StopNoToolCalls, 2},
		{"ellipsis", []reply{text("Working on it..."), finish("ok")}, agent.StopFinished, 1},
		{"a plain final answer ends the run", []reply{text("The bug is fixed: Add now adds.")}, agent.StopNoToolCalls, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := newRun(memenv.New(nil), tc.replies...)
			r.Task.TestCommand = ""
			out, _ := agent.New(agent.Config{}).Run(context.Background(), r)
			nudges := 0
			for _, msg := range out.Messages {
				if msg.Role == agent.RoleUser && strings.Contains(msg.Content, "make the tool call now") {
					nudges++
				}
			}
			if out.Reason != tc.reason || nudges != tc.nudges {
				t.Errorf("reason %s with %d nudges", out.Reason, nudges)
			}
		})
	}
}

func TestFinishReasons(t *testing.T) {
	cut := text("I was about to write a very long")
	cut.resp.FinishReason = agent.FinishLength
	filtered := text("")
	filtered.resp.FinishReason = agent.FinishContentFilter
	for _, tc := range []struct {
		name   string
		first  reply
		reason agent.StopReason
		said   string
	}{
		{"length is fed back", cut, agent.StopFinished, "cut off at the output token limit"},
		{"empty reply is fed back", text(" "), agent.StopFinished, "Your reply was empty"},
		{"content filter ends the run", filtered, agent.StopModelError, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := newRun(memenv.New(nil), tc.first, finish("ok"))
			r.Task.TestCommand = ""
			out, _ := agent.New(agent.Config{}).Run(context.Background(), r)
			if out.Reason != tc.reason || (tc.said != "" && !strings.Contains(out.Messages[3].Content, tc.said)) {
				t.Errorf("reason %s, messages %+v", out.Reason, out.Messages[2:])
			}
		})
	}
}

func TestModelErrors(t *testing.T) {
	rate := &agent.ModelError{Kind: agent.ModelRateLimited, Status: 429, Err: errors.New("slow down")}
	auth := &agent.ModelError{Kind: agent.ModelAuth, Status: 401, Err: errors.New("bad key")}
	cfg := agent.Config{RetryBackoff: time.Microsecond, ModelRetries: 2}
	t.Run("retryable errors are retried", func(t *testing.T) {
		r, m := newRun(memenv.New(nil), reply{err: rate}, reply{err: rate}, finish("ok"))
		r.Task.TestCommand = ""
		out, _ := agent.New(cfg).Run(context.Background(), r)
		if out.Reason != agent.StopFinished || len(m.requests()) != 3 {
			t.Errorf("reason %s after %d calls", out.Reason, len(m.requests()))
		}
	})
	t.Run("retries run out", func(t *testing.T) {
		r, m := newRun(memenv.New(nil), reply{err: rate}, reply{err: rate}, reply{err: rate}, finish("ok"))
		out, _ := agent.New(cfg).Run(context.Background(), r)
		if out.Reason != agent.StopModelError || !agent.IsModelError(out.Err, agent.ModelRateLimited) || len(m.requests()) != 3 {
			t.Errorf("reason %s err %v after %d calls", out.Reason, out.Err, len(m.requests()))
		}
	})
	t.Run("others are not retried", func(t *testing.T) {
		r, m := newRun(memenv.New(nil), reply{err: auth}, finish("ok"))
		out, _ := agent.New(cfg).Run(context.Background(), r)
		if out.Reason != agent.StopModelError || !errors.Is(out.Err, auth) || len(m.requests()) != 1 {
			t.Errorf("reason %s err %v after %d calls", out.Reason, out.Err, len(m.requests()))
		}
	})
}

func TestInvalidRuns(t *testing.T) {
	env := memenv.New(nil)
	m := &fakeModel{}
	for _, tc := range []struct {
		name string
		run  *agent.Run
	}{
		{"nil run", nil},
		{"nil model", &agent.Run{Env: env}},
		{"nil env", &agent.Run{Model: m}},
		{"bad protocol", &agent.Run{Model: m, Env: env, Protocol: "xml"}},
		{"bad mode", &agent.Run{Model: m, Env: env, Mode: "yolo"}},
		{"bad verify", &agent.Run{Model: m, Env: env, Verify: "sometimes"}},
		{"text protocol in plan mode", &agent.Run{Model: m, Env: env, Protocol: "text", Mode: task.ModePlan}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := agent.New(agent.Config{}).Run(context.Background(), tc.run); !errors.Is(err, agent.ErrInvalidRun) {
				t.Errorf("err = %v", err)
			}
		})
	}
}

// brokenEnv fails like a sandbox whose container died.
type brokenEnv struct {
	*memenv.Env
	execErr, readErr error
}

func (e *brokenEnv) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if e.execErr != nil {
		return sandbox.ExecResult{}, e.execErr
	}
	return e.Env.Exec(ctx, req)
}

func (e *brokenEnv) ReadFile(ctx context.Context, p string) ([]byte, error) {
	if e.readErr != nil {
		return nil, e.readErr
	}
	return e.Env.ReadFile(ctx, p)
}

func TestEnvironmentFailuresEndTheRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  *brokenEnv
		call agent.ToolCall
	}{
		{"exec error", &brokenEnv{Env: memenv.New(nil), execErr: errors.New("container gone")}, call("bash", map[string]any{"command": "ls"})},
		{"file error marked as infrastructure", &brokenEnv{Env: memenv.New(nil), readErr: fmt.Errorf("docker cp: %w", agent.ErrEnvFailed)}, view("a.go")},
		{"sandbox gone", &brokenEnv{Env: memenv.New(nil), readErr: &sandbox.Error{Kind: sandbox.ErrGone, Op: "read", Err: errors.New("container removed")}}, view("a.go")},
		{"sandbox limit", &brokenEnv{Env: memenv.New(nil), readErr: &sandbox.Error{Kind: sandbox.ErrLimit, Op: "read", Err: errors.New("out of memory")}}, view("a.go")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := newRun(memenv.New(nil), calls(tc.call), finish("never"))
			r.Env = tc.env
			out, err := agent.New(agent.Config{}).Run(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			if out.Reason != agent.StopEnvError || !errors.Is(out.Err, agent.ErrEnvFailed) && !sandbox.Broken(out.Err) {
				t.Errorf("reason %s err %v", out.Reason, out.Err)
			}
		})
	}
	// An ordinary file error is the model's business.
	r, _ := newRun(memenv.New(nil), calls(view("a.go")), finish("ok"))
	r.Env = &brokenEnv{Env: memenv.New(nil), readErr: &sandbox.Error{Kind: sandbox.ErrInvalid, Op: "read", Err: errors.New("odd error")}}
	r.Task.TestCommand = ""
	out, _ := agent.New(agent.Config{}).Run(context.Background(), r)
	if out.Reason != agent.StopFinished || !strings.Contains(toolResults(out.Messages)[0].Content, "odd error") {
		t.Errorf("reason %s", out.Reason)
	}
}
