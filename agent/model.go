package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Role is who wrote a Message.
type Role string

// The message roles of the chat protocol.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one entry of a conversation with the model.
type Message struct {
	Role    Role   `json:"role"`
	Content string `json:"content,omitempty"`
	// Thinking is reasoning text the model streamed, kept for the trajectory.
	Thinking string `json:"thinking,omitempty"`
	// ToolCalls are the calls an assistant message asks for.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID ties a tool message to the call it answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Summary marks a message that replaced older turns during compaction.
	Summary bool `json:"summary,omitempty"`
}

// ToolCall is one tool invocation requested by the model.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the raw JSON the model sent; it may be invalid.
	Arguments string `json:"arguments"`
}

// ToolSpec describes a tool to the model.
type ToolSpec struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Parameters is the JSON Schema of the arguments object.
	Parameters json.RawMessage `json:"parameters"`
}

// ModelRequest is one chat call.
type ModelRequest struct {
	Model       string
	Messages    []Message
	Tools       []ToolSpec
	MaxTokens   int
	Temperature *float64
}

// FinishReason says why the model stopped producing a reply.
type FinishReason string

// The finish reasons a Model reports.
const (
	FinishStop          FinishReason = "stop"
	FinishToolCalls     FinishReason = "tool_calls"
	FinishLength        FinishReason = "length"
	FinishContentFilter FinishReason = "content_filter"
	FinishOther         FinishReason = "other"
)

// TokenUsage is what one model call consumed.
type TokenUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	CachedTokens int64 `json:"cached_tokens,omitempty"`
}

// ModelResponse is a complete reply.
type ModelResponse struct {
	Message      Message
	FinishReason FinishReason
	Usage        TokenUsage
	// Model is the model name the endpoint reports.
	Model string
}

// StreamEventKind names a streaming delta.
type StreamEventKind string

// The streaming deltas a Model reports while a reply arrives.
const (
	StreamText          StreamEventKind = "text"
	StreamThinking      StreamEventKind = "thinking"
	StreamToolCallStart StreamEventKind = "tool_call_start"
	StreamToolCallArgs  StreamEventKind = "tool_call_args"
	StreamToolCallEnd   StreamEventKind = "tool_call_end"
	// StreamRetry says the attempt failed and the call is made again: what
	// streamed so far is void. Text says why and when.
	StreamRetry StreamEventKind = "retry"
)

// StreamEvent is one delta of a streaming reply.
type StreamEvent struct {
	Kind StreamEventKind
	// Text is the text, thinking or argument delta.
	Text string
	// Index, ID and Name identify the tool call for tool-call events.
	Index int
	ID    string
	Name  string
}

// Model is a chat model with tool calling. Implementations stream deltas to
// onDelta (which may be nil) and return the complete reply. Errors that the
// loop branches on are *ModelError.
type Model interface {
	Chat(ctx context.Context, req ModelRequest, onDelta func(StreamEvent)) (ModelResponse, error)
}

// ModelErrorKind classifies a failed model call.
type ModelErrorKind string

// The classes of model failure.
const (
	ModelRateLimited ModelErrorKind = "rate_limited" // 429
	ModelServer      ModelErrorKind = "server"       // 5xx
	ModelTimeout     ModelErrorKind = "timeout"
	ModelBadRequest  ModelErrorKind = "bad_request"  // 4xx other than 429
	ModelAuth        ModelErrorKind = "auth"         // 401/403
	ModelBadResponse ModelErrorKind = "bad_response" // no choices, cut stream, missing call id
	ModelNetwork     ModelErrorKind = "network"
)

// ModelError is a typed model failure.
type ModelError struct {
	Kind ModelErrorKind
	// Status is the HTTP status, when there was one.
	Status int
	// RetryAfter is the server's requested delay, when it gave one.
	RetryAfter time.Duration
	Err        error
}

func (e *ModelError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("model %s (HTTP %d): %v", e.Kind, e.Status, e.Err)
	}
	return fmt.Sprintf("model %s: %v", e.Kind, e.Err)
}

func (e *ModelError) Unwrap() error { return e.Err }

// Retryable reports whether the call may succeed if repeated: a bad
// response (cut, garbage, empty, too large) is as transient as a 5xx.
func (e *ModelError) Retryable() bool {
	switch e.Kind {
	case ModelRateLimited, ModelServer, ModelTimeout, ModelNetwork, ModelBadResponse:
		return true
	}
	return false
}

// IsModelError reports whether err is a *ModelError of the given kind.
func IsModelError(err error, kind ModelErrorKind) bool {
	var me *ModelError
	return errors.As(err, &me) && me.Kind == kind
}

// Capabilities describe what a model can do (tool calling, its context
// window). The zero value is an
// ordinary tool-calling model of unknown window.
type Capabilities struct {
	// NoToolCalling says the model cannot call tools: a run that names no
	// protocol drives it with the text protocol.
	NoToolCalling bool
	// ContextWindow is the model's context in tokens (0: unknown);
	// Config.ContextWindows overrides it.
	ContextWindow int
}

// CapabilityReporter is implemented by a Model that knows its
// capabilities; the agent asks once per run.
type CapabilityReporter interface {
	Capabilities() Capabilities
}

func capabilitiesOf(m Model) Capabilities {
	if c, ok := m.(CapabilityReporter); ok {
		return c.Capabilities()
	}
	return Capabilities{}
}
