package agent

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// StopReason says why a run ended. The worker maps it to a task.State.
type StopReason string

// The reasons a run ends.
const (
	StopFinished      StopReason = "finished"       // the model called finish
	StopNoToolCalls   StopReason = "end_turn"       // the model replied with no tool call, nothing left to nudge
	StopMaxTurns      StopReason = "max_turns"      // turn limit
	StopMaxCost       StopReason = "max_cost"       // cost limit
	StopMaxTokens     StopReason = "max_tokens"     // token limit
	StopTimeout       StopReason = "timeout"        // wall clock
	StopFormatErrors  StopReason = "format_errors"  // too many consecutive malformed replies
	StopLoopDetected  StopReason = "loop_detected"  // the same call and result repeated
	StopCancelled     StopReason = "cancelled"      // ctx cancelled
	StopModelError    StopReason = "model_error"    // the model failed after retries
	StopEnvError      StopReason = "env_error"      // the sandbox failed
	StopContextWindow StopReason = "context_window" // the history cannot fit even after compaction
)

// Mode is the permission mode of a run.
type Mode string

// The permission modes.
const (
	ModeNormal Mode = ""     // every tool
	ModePlan   Mode = "plan" // read-only tools only
)

// VerifyPolicy says when the task's test command runs during a run.
type VerifyPolicy string

// The verification policies.
const (
	VerifyOnFinish   VerifyPolicy = "finish"      // when the model calls finish (default)
	VerifyAfterWrite VerifyPolicy = "after_write" // after every write tool call
	VerifyNever      VerifyPolicy = "never"
)

// Limits bound one run. Zero values mean "no limit" except where noted.
type Limits struct {
	// MaxTurns: -1 unlimited under HardTurnCap, 0 disabled (no limit), N.
	MaxTurns    int
	MaxCostUSD  float64
	MaxTokens   int64
	Timeout     time.Duration
	HardTurnCap int // default 100
	// MaxFormatErrors ends the run after that many consecutive malformed
	// replies (default 3).
	MaxFormatErrors int
}

// Run is everything one run needs; the Agent keeps none of it.
type Run struct {
	Task task.Task
	// ModelName is sent in each request and keys the price table.
	ModelName string
	Model     Model
	Env       Env
	// Workspace may be nil (no checkpoints, no rollback; Diff unavailable).
	Workspace Checkpointer
	// History continues an earlier conversation; empty starts afresh.
	History []Message
	Limits  Limits
	Mode    Mode
	// AllowedTools restricts the tool set; empty means all (for the mode).
	AllowedTools []string
	Verify       VerifyPolicy
	// Protocol is "tools" (default) or "text".
	Protocol string
	// OnEvent receives progress events; may be nil. Called from the run's
	// goroutine: it must not block for long.
	OnEvent func(task.Event)
	// OnLimit is asked when a limit is reached; returning true continues the
	// run (the limit is raised by its original amount). Nil means stop.
	OnLimit func(reason StopReason) bool
	// Trajectory receives JSONL records of every message, call, result and
	// usage, secrets redacted; may be nil.
	Trajectory io.Writer
	// Secrets are redacted from the trajectory and events.
	Secrets []string
}

// Outcome is how a run ended. The partial work is in the workspace whatever
// the reason.
type Outcome struct {
	Reason StopReason
	// Summary is the finish call's summary (or the text-mode final output).
	Summary string
	// Err is the underlying error for model_error and env_error.
	Err      error
	Usage    task.Usage
	Messages []Message
	// LastTestRun is the latest verification, when one ran.
	LastTestRun *task.TestRun
}

// ErrNotImplemented is returned by the placeholder loop.
var ErrNotImplemented = errors.New("agent loop not implemented")

// Run executes one run to its end. The returned error is reserved for
// invalid input (e.g. a nil Model); every other ending is an Outcome.
func (a *Agent) Run(ctx context.Context, r *Run) (*Outcome, error) {
	return nil, ErrNotImplemented
}

// Config configures an Agent.
type Config struct {
	// Prices maps model name to per-million-token prices.
	Prices map[string]Price
}

// Price is a model's price per million tokens, in US dollars.
type Price struct {
	InputPerMTok  float64
	OutputPerMTok float64
}

// Agent runs coding-agent loops. It is stateless and safe for concurrent use.
type Agent struct {
	cfg Config
}

// New returns an Agent.
func New(cfg Config) *Agent { return &Agent{cfg: cfg} }
