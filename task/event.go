package task

import "time"

// EventKind names what an Event reports.
type EventKind string

// The event kinds a task emits while it runs.
const (
	EventState      EventKind = "state"       // the task changed state
	EventPhase      EventKind = "phase"       // a phase (clone, sandbox, baseline, agent, verify) started or ended
	EventTurn       EventKind = "turn"        // a model turn started
	EventContent    EventKind = "content"     // assistant text
	EventThinking   EventKind = "thinking"    // assistant reasoning text
	EventToolCall   EventKind = "tool_call"   // a tool call is about to run
	EventToolResult EventKind = "tool_result" // a tool call finished
	EventUsage      EventKind = "usage"       // usage after a model call
	EventLimit      EventKind = "limit"       // a limit was reached
	EventCheckpoint EventKind = "checkpoint"  // verification passed and a checkpoint was made
	EventRollback   EventKind = "rollback"    // verification regressed and the tree was rolled back
	EventSetup      EventKind = "setup"       // setup output, or the snapshot hit/miss
	EventEgress     EventKind = "egress"      // a connection through the egress proxy (allowed or denied)
	EventResume     EventKind = "resume"      // a later attempt continued an earlier one's work ("resumed at turn N after <cause>")
	EventLog        EventKind = "log"         // a note for humans
	EventResult     EventKind = "result"      // the final result
)

// Event is one progress report of a running task, streamed to `wrench watch`,
// `--follow` and the SSE endpoint.
type Event struct {
	TaskID string    `json:"task_id"`
	Seq    uint64    `json:"seq,omitempty"`
	Time   time.Time `json:"time"`
	Kind   EventKind `json:"kind"`
	State  State     `json:"state,omitempty"`
	Phase  string    `json:"phase,omitempty"`
	Turn   int       `json:"turn,omitempty"`
	Tool   string    `json:"tool,omitempty"`
	// Model is the model a usage event's call went to (the resolved name,
	// not "" for the default); metrics and traces label by it.
	Model string `json:"model,omitempty"`
	// Text is content, a tool's arguments or output (truncated), or a note.
	Text    string `json:"text,omitempty"`
	IsError bool   `json:"is_error,omitempty"`
	Usage   *Usage `json:"usage,omitempty"`
	// Egress is an egress event's connection.
	Egress  *EgressConnection `json:"egress,omitempty"`
	Result  *Result           `json:"result,omitempty"`
	Elapsed Duration          `json:"elapsed,omitempty"`
}

// EgressConnection is one connection through the egress proxy, as an
// egress event reports it.
type EgressConnection struct {
	Host    string `json:"host"`
	Allowed bool   `json:"allowed"`
	// Rule is the allowlist pattern that allowed it.
	Rule      string `json:"rule,omitempty"`
	BytesUp   int64  `json:"bytes_up"`
	BytesDown int64  `json:"bytes_down"`
}
