package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

// StopReason says why a run ended. The worker maps it to a task.State.
type StopReason string

// The reasons a run ends.
const (
	StopFinished      StopReason = "finished"            // the model called finish (and the tests passed, when verified)
	StopUnverified    StopReason = "finished_unverified" // the model insisted on finishing while the tests still failed
	StopNoToolCalls   StopReason = "end_turn"            // the model replied with no tool call, nothing left to nudge
	StopMaxTurns      StopReason = "max_turns"           // turn limit
	StopMaxCost       StopReason = "max_cost"            // cost limit
	StopMaxTokens     StopReason = "max_tokens"          // token limit
	StopTimeout       StopReason = "timeout"             // wall clock
	StopFormatErrors  StopReason = "format_errors"       // too many consecutive malformed replies
	StopLoopDetected  StopReason = "loop_detected"       // the same call and result repeated
	StopCancelled     StopReason = "cancelled"           // ctx cancelled
	StopModelError    StopReason = "model_error"         // the model failed after retries
	StopEnvError      StopReason = "env_error"           // the sandbox failed
	StopContextWindow StopReason = "context_window"      // the history cannot fit even after compaction
	StopDenied        StopReason = "permission_denied"   // a person refused a tool call (ApproveConfirm)
	StopBudget        StopReason = "budget"              // Run.Budget refused the next model call (a spend cap above the task)
)

// VerifyPolicy says when the task's test command runs during a run.
type VerifyPolicy string

// The verification policies.
const (
	VerifyOnFinish   VerifyPolicy = "finish"      // when the model calls finish (default)
	VerifyAfterWrite VerifyPolicy = "after_write" // after every write tool call, and on finish
	VerifyNever      VerifyPolicy = "never"
)

// Limits bound one run. Zero values mean "no limit" except where noted.
// Every limit ends the run with its own StopReason and keeps the partial
// work; Run.OnLimit may extend a limit instead.
type Limits struct {
	// MaxTurns caps model turns: N > 0 stops after N turns; -1 and 0 (no
	// explicit limit) both stop at HardTurnCap. 0 does not disable the
	// model: the zero value must be a usable run, so 0 only disables the
	// explicit limit.
	MaxTurns int
	// MaxCostUSD caps the model spend, priced by Config.Prices. A model with
	// no price costs 0 and is not bounded by it.
	MaxCostUSD float64
	// MaxTokens caps input plus output tokens over all model calls.
	MaxTokens int64
	// Timeout caps the run's wall-clock time.
	Timeout time.Duration
	// HardTurnCap bounds runs without an explicit turn limit (default
	// task.MaxTurnsHardCap).
	HardTurnCap int
	// MaxFormatErrors ends the run after that many consecutive malformed
	// replies (default 3).
	MaxFormatErrors int
}

// EnvInfo describes the environment for the environment prompt. When a Run
// leaves it nil the agent asks the Env once (git and uname).
type EnvInfo struct {
	// GitState is a one-line description, e.g. "branch main, clean".
	GitState string
	// OS is the platform, e.g. "Linux x86_64".
	OS string
}

// Run is everything one run needs; the Agent keeps none of it.
type Run struct {
	Task task.Task
	// ModelName is sent in each request and keys the price table.
	ModelName string
	Model     Model
	Env       sandbox.Env
	// Workspace may be nil (no checkpoints, no rollback; Diff unavailable).
	Workspace sandbox.Checkpointer
	// BaseCheckpoint is the checkpoint of the untouched tree, the first
	// rollback target. Empty makes the agent take one at the start when
	// Workspace is set and verification can run.
	BaseCheckpoint string
	// Baseline is the test command's outcome before any change, used to tell
	// a regression from a test that already failed. Nil means unknown.
	Baseline *task.TestRun
	// BaseCommit is the commit the workspace started from; the trajectory's
	// run_start record keeps it so a replay checks out the same tree.
	BaseCommit string
	// EnvInfo fills the environment prompt; nil probes the Env once.
	EnvInfo *EnvInfo
	// History continues an earlier conversation; empty starts afresh. When it
	// is set no new instance message is added.
	History []Message
	// Resume continues the run an earlier attempt saved (see SavePoint and
	// OnSave), whose tree the caller has restored: its conversation (it
	// takes History's place), turn count and read files. Nil starts afresh.
	Resume *SavePoint
	// Spent is the model use of earlier attempts of the task (tokens, cost,
	// calls; its Turns are ignored): the run's usage starts from it, so
	// its limits count it and Outcome.Usage includes it.
	Spent task.Usage
	// OnSave, when set, is given a SavePoint at the end of every turn that
	// made a verified checkpoint and of every SaveEvery-th turn, for a
	// later attempt to continue from; the workspace holds the matching
	// tree while it runs. Called from the run's goroutine.
	OnSave func(SavePoint)
	// SaveEvery is how many turns pass between save points without a
	// verified checkpoint (default DefaultSaveEvery).
	SaveEvery int
	// Budget, when set, is spend above the task that every model call
	// draws on: each call's worst-case cost is reserved before it is made
	// (refused: the run ends with StopBudget, after a last OnSave) and
	// what it cost is settled after. Calls then carry a cap on their
	// output (Config.MaxOutputTokens), which bounds the worst case.
	Budget Budget
	Limits Limits
	// Mode is task.ModeNormal (every tool) or task.ModePlan (read-only).
	Mode task.Mode
	// AllowedTools restricts the tool set; empty means all (for the mode).
	// finish is always available.
	AllowedTools []string
	// Approval is who approves tool calls that change something: yolo (the
	// default; nobody asks, as in the service) or confirm (Approve is asked
	// before every command and every write, with the diff).
	Approval ApprovalMode
	// Approve decides one call in confirm mode; required there. A refusal
	// is told to the model and ends the run with permission_denied.
	Approve Approver
	// PlanFirst runs a planning phase before the work: only the read-only
	// tools until the model calls finish with its plan, then every tool
	// (plan-then-execute). Outcome.Plan keeps the plan.
	PlanFirst bool
	Verify    VerifyPolicy
	// TestTimeout bounds one run of the test command during verification
	// (default task.DefaultTestTimeout); the worker passes the task's
	// effective one, the same that bounds its own test runs.
	TestTimeout time.Duration
	// Protocol is task.ProtocolTools or task.ProtocolText; empty picks
	// tools, or text for a model whose Capabilities say it cannot call
	// tools.
	Protocol task.Protocol
	// OnEvent receives progress events; may be nil. Called from the run's
	// goroutine: it must not block for long.
	OnEvent func(task.Event)
	// StreamEvents makes content and thinking events carry each streamed
	// delta as it arrives; by default each reply's text is one event.
	StreamEvents bool
	// OnStream receives every raw streaming delta (text, thinking and
	// tool-call start/arguments/end); may be nil.
	OnStream func(StreamEvent)
	// OnLimit is asked when a limit is reached; returning true continues the
	// run with another allowance of the limit's original size (turns, cost,
	// tokens or time from now; the format-error count starts again). Nil
	// means stop. Loop detection and cancellation are not limits and never
	// ask. Called from the run's goroutine.
	OnLimit func(reason StopReason) bool
	// Trajectory receives JSONL records of every message, call, result and
	// usage, secrets redacted; may be nil.
	Trajectory io.Writer
	// Secrets are redacted from the trajectory and events.
	Secrets []string
	// ProjectInstructions, when set, are the repository's instruction
	// files for this run (its `.wrench.yaml` names them) instead of
	// Config.ProjectInstructions.
	ProjectInstructions []string

	// subAgent marks a research sub-run (its prompts differ).
	subAgent bool
}

// Budget is spend above a task (a repository's or tenant's daily cap,
// shared by every worker of a deployment) that a run's model calls draw
// on.
type Budget interface {
	// Reserve holds usd, the worst-case cost of one model call: the
	// prompt's tokens at the input price plus the call's output cap at
	// the output price (Config.Prices). An error matching
	// task.ErrOverBudget refuses the call and ends the run with
	// StopBudget; any other error ends it with StopEnvError.
	Reserve(ctx context.Context, usd float64) (BudgetHold, error)
}

// BudgetHold is one call's reservation.
type BudgetHold interface {
	// Settle records what the call cost (0 when it failed) and gives
	// back the rest of the reservation.
	Settle(ctx context.Context, usd float64) error
}

// Outcome is how a run ended. The partial work is in the workspace whatever
// the reason.
type Outcome struct {
	Reason StopReason
	// Summary is the finish call's summary (or the text-mode final output,
	// or the last reply's text for end_turn).
	Summary string
	// Err is the underlying error for model_error, env_error and
	// context_window, and the Approver's error for permission_denied.
	Err      error
	Usage    task.Usage
	Messages []Message
	// LastTestRun is the latest verification the agent ran (nil when none
	// ran). When the run ends with finished it passed; finished_unverified
	// carries the failing run.
	LastTestRun *task.TestRun
	// Checkpoint is the last checkpoint that passed verification (or the
	// base checkpoint); empty without a Workspace.
	Checkpoint string
	// Rollbacks counts regressions rolled back during the run.
	Rollbacks int
	// Compactions counts summarising compactions.
	Compactions int
	// FileHistory holds, per path, every version before and after each write
	// the agent's tools made, in order.
	FileHistory map[string][]FileVersion
	// Duration is the run's wall-clock time.
	Duration time.Duration
	// Plan is the plan the model made in the planning phase (PlanFirst).
	Plan string
}

// FileVersion is one write of one file: its content before and after. Nil
// Before means the file was created; nil After means it was deleted.
type FileVersion struct {
	Turn   int    `json:"turn"`
	Tool   string `json:"tool"`
	Before []byte `json:"before,omitempty"`
	After  []byte `json:"after,omitempty"`
}

// ErrInvalidRun is wrapped by the error Agent.Run returns for unusable input
// (a nil Model or Env, an unknown protocol or mode, a prompt that does not
// render).
var ErrInvalidRun = errors.New("agent: invalid run")

// ErrEnvFailed marks an Env error as an infrastructure failure (the sandbox
// is gone, the engine is unreachable). Env implementations may wrap it, and
// errors for which sandbox.Broken holds count as such too; a tool that
// meets one ends the run with env_error instead of telling the model. Exec
// errors other than cancellation always count as such.
var ErrEnvFailed = errors.New("environment failed")

// envFailed reports whether err is an infrastructure failure (see
// ErrEnvFailed).
func envFailed(err error) bool {
	return errors.Is(err, ErrEnvFailed) || sandbox.Broken(err)
}

// Config configures an Agent. The zero value is usable: every field has a
// default, applied by New.
type Config struct {
	// Prices maps model name to per-million-token prices: exactly, then
	// without a provider prefix ("openai/gpt-4o"), then without a snapshot
	// suffix ("gpt-4o-2024-08-06"). The table's source is the operator's
	// configuration (llm.DefaultPrices with a price file copied over it,
	// `--prices`). An unlisted model costs 0, is logged once per run, and
	// is not bounded by MaxCostUSD.
	Prices map[string]Price
	// ContextWindows maps model name (looked up like Prices) to its context
	// window in tokens; unlisted models get DefaultContextWindow.
	ContextWindows map[string]int
	// Prompts overrides the prompt templates; empty fields keep the defaults.
	Prompts PromptSet
	// MaxOutputChars caps each tool output sent to the model, head and tail
	// kept (default 10,000).
	MaxOutputChars int
	// MaxCallsPerReply is how many tool calls of one reply run (default
	// 32); the rest are answered "Not run" and the reply counts as a
	// format error.
	MaxCallsPerReply int
	// MaxToolArgBytes caps one call's arguments (default 1 MiB): a bigger
	// call is answered with an error and does not run, and its arguments
	// are not kept in the history, the events or the trajectory.
	MaxToolArgBytes int
	// CommandTimeout is the default bash timeout (default 2 minutes);
	// MaxCommandTimeout caps what a call may ask for (default 30 minutes).
	CommandTimeout    time.Duration
	MaxCommandTimeout time.Duration
	// MaxFinishRejections is how many times finish is refused because the
	// tests fail before the run ends as finished_unverified (default 2).
	MaxFinishRejections int
	// MaxOutputTokens caps each reply of a run with a Budget (sent as the
	// request's max_completion_tokens), which bounds the worst case the
	// budget reserves (default DefaultMaxOutputTokens). Runs without a
	// Budget send no cap.
	MaxOutputTokens int
	// Compaction tunes history compaction.
	Compaction CompactionConfig
	// Recovery tunes error recovery and loop detection.
	Recovery RecoveryConfig
	// Diagnostics tunes the checkers run after writes.
	Diagnostics DiagnosticsConfig
	// SubAgents offers the research tool (a read-only sub-run).
	SubAgents SubAgentConfig
	// CodeSearch offers the search tool (ranked code search); off by
	// default.
	CodeSearch bool
	// ProjectInstructions are files of the repository whose content joins
	// the system prompt as the project layer (default AGENTS.md and
	// .wrench/instructions.md); NoProjectInstructions turns that off.
	ProjectInstructions   []string
	NoProjectInstructions bool
	// ModelRetries is how often the loop repeats a call that failed with
	// a retryable model error (default 0: the Model retries, as the llm
	// client does, and the two would multiply); RetryBackoff is the first
	// delay, doubled each time (default 1s), unless the server asked for a
	// longer one.
	ModelRetries int
	RetryBackoff time.Duration
	// Logger receives operational logs; nil discards them.
	Logger *slog.Logger
	// Now returns the current time (default time.Now); tests pin it.
	Now func() time.Time
}

// CompactionConfig says when and how the history is compacted.
type CompactionConfig struct {
	// Threshold is the share of the context window at which compaction
	// starts (default 0.8).
	Threshold float64
	// KeepTurns is how many recent turns stay verbatim (default 4).
	KeepTurns int
	// MaxPerRun caps summarising compactions per run (default 3).
	MaxPerRun int
	// MinTurnsBetween is the least number of turns between two summarising
	// compactions (default 5).
	MinTurnsBetween int
	// Disabled turns compaction off.
	Disabled bool
}

// RecoveryConfig tunes error recovery and loop detection.
type RecoveryConfig struct {
	// AttemptBudget is how many failed attempts at one subtask (failing
	// commands or verifications since the last success) earn a "try a
	// completely different approach" nudge (default 3).
	AttemptBudget int
	// LoopWindow is how many recent tool calls loop detection looks at
	// (default 12); LoopRepeats is how often the same call with the same
	// result may occur in it before a nudge, and again after the nudge
	// before the run ends with loop_detected (default 3).
	LoopWindow  int
	LoopRepeats int
	// MaxIntentNudges is how many replies in a row that announce an action
	// without doing it get a nudge (default 2).
	MaxIntentNudges int
}

// Price is a model's price per million tokens, in US dollars: the one
// price model (llm.DefaultPrices and price files produce it).
type Price struct {
	InputPerMTok  float64
	OutputPerMTok float64
	// CachedInputPerMTok prices input tokens served from the prompt cache;
	// 0 means they cost InputPerMTok.
	CachedInputPerMTok float64
}

// Cost is what usage u costs at this price. Cached tokens are counted
// within InputTokens, as the OpenAI API reports them.
func (p Price) Cost(u TokenUsage) float64 {
	cached := min(max(u.CachedTokens, 0), u.InputTokens)
	cachedPrice := p.CachedInputPerMTok
	if cachedPrice == 0 {
		cachedPrice = p.InputPerMTok
	}
	return (float64(u.InputTokens-cached)*p.InputPerMTok +
		float64(cached)*cachedPrice +
		float64(u.OutputTokens)*p.OutputPerMTok) / 1e6
}

// Agent runs coding-agent loops. It is stateless and safe for concurrent
// use: one Agent serves any number of concurrent runs.
type Agent struct {
	cfg     Config
	prompts *prompts
	// promptErr is reported by Run (and Validate) when a prompt override
	// does not parse.
	promptErr error
}

// New returns an Agent, filling defaults into cfg.
func New(cfg Config) *Agent {
	cfg = cfg.withDefaults()
	p, err := parsePrompts(cfg.Prompts)
	if err == nil {
		err = p.check()
	}
	return &Agent{cfg: cfg, prompts: p, promptErr: err}
}

// Validate reports a configuration problem (a prompt template that does not
// parse, or names a key prompts do not have) that would make every Run
// fail.
func (a *Agent) Validate() error { return a.promptErr }
