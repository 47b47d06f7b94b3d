package task

import "time"

// State is where a task is in its life. The final states are the Result
// statuses; a task never leaves a final state.
type State string

// The task states, in the order a task usually passes through them.
const (
	StateQueued     State = "queued"
	StateRunning    State = "running"
	StateVerifying  State = "verifying"
	StateResolved   State = "resolved"
	StateUnresolved State = "unresolved"
	StateFailed     State = "failed"
	StateCancelled  State = "cancelled"
	StateTimedOut   State = "timed_out"
	StateRejected   State = "rejected"
	// StatePaused is a task waiting for a spend cap above it (its
	// repository's or tenant's daily budget) to allow its next model call;
	// its work is kept and it continues from there (see Pause).
	StatePaused State = "paused"
)

// Final reports whether s is a final state.
func (s State) Final() bool {
	switch s {
	case StateResolved, StateUnresolved, StateFailed, StateCancelled, StateTimedOut, StateRejected:
		return true
	}
	return false
}

// Valid reports whether s is one of the known states.
func (s State) Valid() bool {
	return s.Final() || s == StateQueued || s == StateRunning || s == StateVerifying || s == StatePaused
}

// ExitCode maps a final state to the exit code `wrench run` and
// `wrench submit --wait` use: 0 resolved, 1 unresolved (or cancelled or timed
// out: the work was not done), 2 rejected (bad input), 3 failed
// (infrastructure).
func (s State) ExitCode() int {
	switch s {
	case StateResolved:
		return 0
	case StateRejected:
		return 2
	case StateFailed:
		return 3
	}
	return 1
}

// Result is what a worker hands back for a task, in every final state: an
// unresolved, failed, cancelled or timed-out task still carries its work so
// far in Patch.
type Result struct {
	TaskID string `json:"task_id"`
	// Status is the final state.
	Status State `json:"status"`
	// Reason says why the run ended (e.g. "finished", "max_turns",
	// "loop_detected", "tests_failed", "clone: …").
	Reason string `json:"reason,omitempty"`
	// Fault says whose fault a failure was: the infrastructure's, the
	// model's, the repository's setup, or the task's input. Empty when the
	// task was resolved or the work simply was not done.
	Fault Fault `json:"fault,omitempty"`
	// Summary is the agent's own summary from its finish call.
	Summary string `json:"summary,omitempty"`
	// Patch is the unified diff base..final that `git apply` accepts.
	Patch string `json:"patch,omitempty"`
	// BaseCommit is the commit the patch applies to.
	BaseCommit string `json:"base_commit,omitempty"`
	// Setup is how the task's environment was prepared: a snapshot hit,
	// or a miss and the setup commands' outcome.
	Setup *SetupRun `json:"setup,omitempty"`
	// TestsBefore and TestsAfter are the test command's outcomes.
	TestsBefore *TestRun `json:"tests_before,omitempty"`
	TestsAfter  *TestRun `json:"tests_after,omitempty"`
	// Grade is the outcome of the task's hidden grading spec, when it has one.
	Grade   *Grade  `json:"grade,omitempty"`
	Usage   Usage   `json:"usage"`
	Timings Timings `json:"timings"`
	// Artifacts names what the artifact store holds for this task.
	Artifacts []string `json:"artifacts,omitempty"`
	// Attempt is the delivery attempt that produced this result (1-based).
	Attempt int `json:"attempt,omitempty"`
	// Resumed says where this attempt took over an earlier one's work:
	// "resumed at turn N after <cause>" (empty when it started afresh).
	Resumed string `json:"resumed,omitempty"`
	// HandedBack counts the earlier attempts handed back through no fault
	// of the task: the worker's own sandbox engine, image or disk was
	// unusable (a fault of the infrastructure, blamed on that worker), or
	// it shut down on the task's last delivery. They do not count toward
	// the task's delivery limit.
	HandedBack int `json:"handed_back,omitempty"`
	// Tenant is the task's tenant (Task.Tenant, or the default one).
	Tenant string `json:"tenant,omitempty"`
	// Worker identifies the worker that produced it.
	Worker     string    `json:"worker,omitempty"`
	FinishedAt time.Time `json:"finished_at"`
	// PullRequestURL is set when a pull request was opened.
	PullRequestURL string `json:"pull_request_url,omitempty"`
}

// Fault classifies why a task did not succeed, so reports and metrics keep
// infrastructure trouble apart from the model's and the repository's.
type Fault string

// The fault classes.
const (
	FaultNone  Fault = ""
	FaultInfra Fault = "infrastructure" // engine, disk, network, store: not the task's doing
	FaultModel Fault = "model"          // the model errored, looped or ran out of turns, cost or tokens
	FaultSetup Fault = "setup"          // the repository's setup failed or timed out
	FaultInput Fault = "input"          // the task or the repository's configuration is invalid
)

// ReasonSetupFailed starts the Reason of a task whose setup failed.
const ReasonSetupFailed = "setup_failed"

// Snapshot outcomes of a task's environment.
const (
	SnapshotHit  = "hit"  // started from a cached environment snapshot; setup skipped
	SnapshotMiss = "miss" // setup ran and a snapshot was built
	SnapshotNone = "none" // no snapshot (built without caching)
)

// SetupRun is how a task's environment was prepared.
type SetupRun struct {
	// Snapshot is SnapshotHit, SnapshotMiss or SnapshotNone.
	Snapshot string `json:"snapshot"`
	// Key identifies the environment by content (base image, setup, env
	// and the repository's manifests and lockfiles).
	Key string `json:"key,omitempty"`
	// Image is the image the agent phase ran on.
	Image string `json:"image,omitempty"`
	// Warm says the agent phase's sandbox was started ahead of time (the
	// warm pool).
	Warm bool `json:"warm,omitempty"`
	// Commands are the setup commands that ran (on a miss).
	Commands []string      `json:"commands,omitempty"`
	ExitCode int           `json:"exit_code"`
	Passed   bool          `json:"passed"`
	TimedOut bool          `json:"timed_out,omitempty"`
	Duration time.Duration `json:"duration_ns"`
	// Output is the tail of the setup's combined output.
	Output string `json:"output,omitempty"`
	// Egress summarises the connections setup opened, by host and verdict.
	Egress []EgressSummary `json:"egress,omitempty"`
}

// EgressSummary counts the connections to one host with one verdict.
type EgressSummary struct {
	Host        string `json:"host"`
	Allowed     bool   `json:"allowed"`
	Connections int    `json:"connections"`
	Bytes       int64  `json:"bytes"`
}

// TestRun is one run of the task's test command.
type TestRun struct {
	Command  string        `json:"command"`
	ExitCode int           `json:"exit_code"`
	Passed   bool          `json:"passed"`
	Duration time.Duration `json:"duration_ns"`
	// Output is the tail of the combined output.
	Output string `json:"output,omitempty"`
}

// Usage totals a run's model and tool use.
type Usage struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
	Turns        int     `json:"turns"`
	ToolCalls    int     `json:"tool_calls"`
	ModelCalls   int     `json:"model_calls"`
}

// Add returns u plus v.
func (u Usage) Add(v Usage) Usage {
	u.InputTokens += v.InputTokens
	u.OutputTokens += v.OutputTokens
	u.CostUSD += v.CostUSD
	u.Turns += v.Turns
	u.ToolCalls += v.ToolCalls
	u.ModelCalls += v.ModelCalls
	return u
}

// Timings are how long each phase of a task took.
type Timings struct {
	QueueWait time.Duration `json:"queue_wait_ns,omitempty"`
	Clone     time.Duration `json:"clone_ns,omitempty"`
	// Setup is preparing the environment: a snapshot hit's start and
	// checkout, or a miss's setup and snapshot too.
	Setup        time.Duration `json:"setup_ns,omitempty"`
	SandboxStart time.Duration `json:"sandbox_start_ns,omitempty"`
	Baseline     time.Duration `json:"baseline_ns,omitempty"`
	Agent        time.Duration `json:"agent_ns,omitempty"`
	Verify       time.Duration `json:"verify_ns,omitempty"`
	Grade        time.Duration `json:"grade_ns,omitempty"`
	Total        time.Duration `json:"total_ns"`
}

// Status is the record of a task's current state, as kept in the state store
// and returned by `wrench status`.
type Status struct {
	TaskID    string    `json:"task_id"`
	State     State     `json:"state"`
	Attempt   int       `json:"attempt,omitempty"`
	Worker    string    `json:"worker,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Task      *Task     `json:"task,omitempty"`
	Result    *Result   `json:"result,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Progress is the latest live figure of a running task.
	Progress *Progress `json:"progress,omitempty"`
	// Message is the queue message (its stream sequence) the running
	// attempt was delivered from: a delivery of another message while this
	// one's holder is alive is a duplicate of the task, not a takeover.
	Message uint64 `json:"message,omitempty"`
	// Spent is the model use (tokens, cost, calls) of the task's earlier
	// attempts that ended without a result: a later attempt adds its own
	// to it, and the task's limits count it.
	Spent *Usage `json:"spent,omitempty"`
	// Pause says why a paused task waits (State paused); nil otherwise.
	Pause *Pause `json:"pause,omitempty"`
}

// Progress is a live snapshot of a running task. The figures are the
// running attempt's own (Turn is the conversation's, which a resumed
// attempt continues).
type Progress struct {
	Turn     int     `json:"turn"`
	LastTool string  `json:"last_tool,omitempty"`
	Tokens   int64   `json:"tokens"`
	CostUSD  float64 `json:"cost_usd"`
	// InputTokens and OutputTokens split Tokens; ModelCalls counts the
	// calls they came from.
	InputTokens  int64 `json:"input_tokens,omitempty"`
	OutputTokens int64 `json:"output_tokens,omitempty"`
	ModelCalls   int   `json:"model_calls,omitempty"`
}

// Report is what running a task produces: the Result plus the artifacts the
// artifact store keeps (patch, trajectory.jsonl, log), and whether a failure
// was an infrastructure fault worth redelivering.
type Report struct {
	Result Result
	// Artifacts maps artifact name (e.g. "patch.diff", "trajectory.jsonl",
	// "log.txt") to its bytes.
	Artifacts map[string][]byte
	// Retry is true when the task failed for an infrastructure reason
	// (engine down, network error on clone) and should be delivered again.
	Retry bool
	// Pause, when set, says the run stopped before a model call that a
	// spend cap above the task would not allow: the task is to be paused,
	// not finished (Result.Status is then StatePaused), its work so far
	// saved for the attempt that continues it.
	Pause *Pause
}
