package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/sandbox"
)

// bigOutputs returns n replies whose commands print size characters each.
func bigOutputs(env *memenv.Env, n, size int) []reply {
	env.Fallback(func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		return sandbox.ExecResult{Output: []byte(req.Command + strings.Repeat(".", size))}, nil
	})
	var out []reply
	for i := 0; i < n; i++ {
		r := calls(call("bash", map[string]any{"command": fmt.Sprintf("dump %d", i)}))
		r.resp.Usage = agent.TokenUsage{} // no reported usage: the estimate decides
		out = append(out, r)
	}
	return out
}

// summariser wraps replies so that summary requests (no tools) get a
// summary and do not consume the script.
type summariser struct {
	*fakeModel
	summaries int
	fail      bool
}

func (s *summariser) Chat(ctx context.Context, req agent.ModelRequest, onDelta func(agent.StreamEvent)) (agent.ModelResponse, error) {
	if len(req.Tools) == 0 && len(req.Messages) == 1 && strings.Contains(req.Messages[0].Content, "summarising the earlier part") {
		s.summaries++
		if s.fail {
			return agent.ModelResponse{}, &agent.ModelError{Kind: agent.ModelBadRequest, Err: fmt.Errorf("too long")}
		}
		return agent.ModelResponse{Message: agent.Message{Content: fmt.Sprintf("SUMMARY %d: ran dumps.", s.summaries)}, Usage: agent.TokenUsage{InputTokens: 50, OutputTokens: 5}}, nil
	}
	return s.fakeModel.Chat(ctx, req, onDelta)
}

func TestCompaction(t *testing.T) {
	t.Run("old outputs are elided first", func(t *testing.T) {
		env := memenv.New(nil)
		r, m := newRun(env, append(bigOutputs(env, 8, 2000), finish("ok"))...)
		r.Task.TestCommand = ""
		sm := &summariser{fakeModel: m}
		r.Model = sm
		cfg := agent.Config{ContextWindows: map[string]int{"scripted": 4000}, Compaction: agent.CompactionConfig{KeepTurns: 2}}
		out, _ := agent.New(cfg).Run(context.Background(), r)
		if out.Reason != agent.StopFinished || sm.summaries != 0 {
			t.Fatalf("reason %s, %d summaries", out.Reason, sm.summaries)
		}
		elided := 0
		for _, msg := range toolResults(out.Messages) {
			if strings.HasPrefix(msg.Content, "[output elided") {
				elided++
			}
		}
		if elided == 0 {
			t.Errorf("nothing elided")
		}
		// The last turns stay verbatim.
		res := toolResults(out.Messages)
		if strings.HasPrefix(res[len(res)-2].Content, "[output elided") {
			t.Errorf("a kept turn was elided")
		}
	})
	t.Run("then summarised, keeping system, task and recent turns; rate limited", func(t *testing.T) {
		env := memenv.New(nil)
		// Long assistant texts cannot be elided: only a summary helps.
		var replies []reply
		for _, r := range bigOutputs(env, 20, 10) {
			r.resp.Message.Content = strings.Repeat("thinking out loud ", 60)
			replies = append(replies, r)
		}
		r, m := newRun(env, append(replies, finish("ok"))...)
		r.Task.TestCommand = ""
		sm := &summariser{fakeModel: m}
		r.Model = sm
		cfg := agent.Config{ContextWindows: map[string]int{"scripted": 3000}, Compaction: agent.CompactionConfig{KeepTurns: 2, MaxPerRun: 2, MinTurnsBetween: 4}}
		out, _ := agent.New(cfg).Run(context.Background(), r)
		if sm.summaries != 2 || out.Compactions != 2 {
			t.Errorf("%d summaries, %d compactions; want 2 (MaxPerRun)", sm.summaries, out.Compactions)
		}
		if out.Reason != agent.StopContextWindow {
			t.Errorf("reason %s, want context_window once compaction is exhausted", out.Reason)
		}
		msgs := out.Messages
		if msgs[0].Role != agent.RoleSystem || !strings.Contains(msgs[1].Content, "Fix Add.") {
			t.Errorf("head not kept: %+v", msgs[:2])
		}
		if !msgs[2].Summary || !strings.Contains(msgs[2].Content, "SUMMARY 2") {
			t.Errorf("third message is not the latest summary: %+v", msgs[2])
		}
		// Every tool result still follows its call.
		for i, msg := range msgs {
			if msg.Role == agent.RoleTool && (i == 0 || (msgs[i-1].Role != agent.RoleAssistant && msgs[i-1].Role != agent.RoleTool)) {
				t.Errorf("orphan tool result at %d", i)
			}
		}
	})
	t.Run("a failing summary does not end the run while it fits", func(t *testing.T) {
		env := memenv.New(nil)
		var replies []reply
		for _, r := range bigOutputs(env, 6, 10) {
			r.resp.Message.Content = strings.Repeat("x", 1000)
			replies = append(replies, r)
		}
		r, m := newRun(env, append(replies, finish("ok"))...)
		r.Task.TestCommand = ""
		sm := &summariser{fakeModel: m, fail: true}
		r.Model = sm
		cfg := agent.Config{ContextWindows: map[string]int{"scripted": 3000}, Compaction: agent.CompactionConfig{KeepTurns: 1, Threshold: 0.5}}
		out, _ := agent.New(cfg).Run(context.Background(), r)
		if out.Reason != agent.StopFinished || sm.summaries == 0 || sm.summaries > 2 {
			t.Errorf("reason %s, %d summary attempts", out.Reason, sm.summaries)
		}
	})
}
