package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

// fakeModel plays a scripted slice of replies, recording each request.
// When the script runs out it answers with plain text.
type fakeModel struct {
	mu      sync.Mutex
	replies []reply
	reqs    []agent.ModelRequest
}

// reply is one scripted answer: a response, or an error, or a function
// computing either from the request.
type reply struct {
	resp   agent.ModelResponse
	err    error
	fn     func(ctx context.Context, req agent.ModelRequest, onDelta func(agent.StreamEvent)) (agent.ModelResponse, error)
	stream []agent.StreamEvent
}

func (m *fakeModel) Chat(ctx context.Context, req agent.ModelRequest, onDelta func(agent.StreamEvent)) (agent.ModelResponse, error) {
	m.mu.Lock()
	i := len(m.reqs)
	req.Messages = slices.Clone(req.Messages)
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return agent.ModelResponse{}, err
	}
	if i >= len(m.replies) {
		return agent.ModelResponse{Message: agent.Message{Role: agent.RoleAssistant, Content: "I am done."}, FinishReason: agent.FinishStop}, nil
	}
	r := m.replies[i]
	if onDelta != nil {
		for _, ev := range r.stream {
			onDelta(ev)
		}
	}
	if r.fn != nil {
		return r.fn(ctx, req, onDelta)
	}
	return r.resp, r.err
}

func (m *fakeModel) requests() []agent.ModelRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reqs)
}

// call builds a tool call with JSON arguments.
func call(name string, args map[string]any) agent.ToolCall {
	b, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return agent.ToolCall{Name: name, Arguments: string(b)}
}

// calls builds a tool-calling reply; ids are filled in order.
func calls(cs ...agent.ToolCall) reply {
	for i := range cs {
		if cs[i].ID == "" {
			cs[i].ID = fmt.Sprintf("c%d_%s", i, cs[i].Name)
		}
	}
	return reply{resp: agent.ModelResponse{
		Message:      agent.Message{Role: agent.RoleAssistant, ToolCalls: cs},
		FinishReason: agent.FinishToolCalls,
		Usage:        agent.TokenUsage{InputTokens: 100, OutputTokens: 10},
	}}
}

// text builds a plain-text reply.
func text(s string) reply {
	return reply{resp: agent.ModelResponse{
		Message:      agent.Message{Role: agent.RoleAssistant, Content: s},
		FinishReason: agent.FinishStop,
		Usage:        agent.TokenUsage{InputTokens: 100, OutputTokens: 10},
	}}
}

func finish(summary string) reply {
	return calls(call("finish", map[string]any{"summary": summary}))
}

// passFail registers a test command whose outcome the returned func sets.
func testCommand(env *memenv.Env, cmd string, result func() (int, string)) {
	env.Handle(cmd, func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		code, out := result()
		return sandbox.ExecResult{ExitCode: code, Output: []byte(out)}, nil
	})
}

// recorder collects events.
type recorder struct {
	mu     sync.Mutex
	events []task.Event
}

func (r *recorder) on(e task.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) kinds() []task.EventKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []task.EventKind
	for _, e := range r.events {
		out = append(out, e.Kind)
	}
	return out
}

func (r *recorder) of(kind task.EventKind) []task.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []task.Event
	for _, e := range r.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// toolResults returns the tool messages of a history, in order.
func toolResults(msgs []agent.Message) []agent.Message {
	var out []agent.Message
	for _, m := range msgs {
		if m.Role == agent.RoleTool {
			out = append(out, m)
		}
	}
	return out
}

// lastUser returns the last user message's content.
func lastUser(msgs []agent.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == agent.RoleUser {
			return msgs[i].Content
		}
	}
	return ""
}

var envInfo = &agent.EnvInfo{GitState: "branch main, clean", OS: "Linux x86_64"}

// newRun returns a run over env with the model's replies.
func newRun(env *memenv.Env, replies ...reply) (*agent.Run, *fakeModel) {
	m := &fakeModel{replies: replies}
	return &agent.Run{
		Task:      task.Task{ID: "t-1", Instruction: "Fix Add.", TestCommand: "go test ./..."},
		ModelName: "scripted",
		Model:     m,
		Env:       env,
		EnvInfo:   envInfo,
	}, m
}
