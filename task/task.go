package task

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// Task is one unit of work: an instruction to carry out on a repository.
// It is the JSON body accepted by the HTTP API, `wrench submit` and the
// NATS work queue.
type Task struct {
	// ID identifies the task; NewID fills it when the submitter left it empty.
	ID string `json:"id,omitempty"`
	// Repo says what to clone.
	Repo Repo `json:"repo"`
	// Instruction is what the agent is asked to do.
	Instruction string `json:"instruction"`
	// TestCommand verifies the work; empty means the agent's finish decides.
	TestCommand string `json:"test_command,omitempty"`
	// Image overrides the sandbox image.
	Image string `json:"image,omitempty"`
	// Model overrides the model name (or "scripted:FILE").
	Model string `json:"model,omitempty"`
	// Protocol selects how the model is driven: "tools" (the default when
	// the model can call tools) or "text".
	Protocol Protocol `json:"protocol,omitempty"`
	// Mode is "" (every tool) or "plan" (read-only tools: investigate and
	// report, change nothing).
	Mode Mode `json:"mode,omitempty"`
	// PlanFirst runs a read-only planning phase before the work.
	PlanFirst bool `json:"plan_first,omitempty"`
	// AllowedTools restricts the agent's tools to these names.
	AllowedTools []string `json:"allowed_tools,omitempty"`
	// Limits bound the run.
	Limits Limits `json:"limits,omitempty"`
	// Sandbox overrides sandbox resources and network for this task.
	Sandbox SandboxOptions `json:"sandbox,omitempty"`
	// Output says where the result goes besides the result store.
	Output Output `json:"output,omitempty"`
	// Source records where the task came from.
	Source Source `json:"source,omitempty"`
	// Tenant is whom the task runs for: the server assigns it from its
	// policy (the API token, the GitHub owner or the repository), never
	// the client alone. It names the task's share of the queue, its
	// cluster-wide concurrency limit and its budget (docs/decisions.md,
	// Tenants). Empty is [DefaultTenant].
	Tenant string `json:"tenant,omitempty"`
	// Grading, when set, is the hidden grading spec of a benchmark task
	// (see Grading); the agent never sees it.
	Grading *Grading `json:"grading,omitempty"`
	// CreatedAt is when the task was accepted.
	CreatedAt time.Time `json:"created_at,omitempty"`
}

// Mode is a task's permission mode.
type Mode string

// The permission modes.
const (
	ModeNormal Mode = ""     // every tool
	ModePlan   Mode = "plan" // read-only tools only (view, ls, glob, grep, finish)
)

// Protocol is how the model is driven.
type Protocol string

// The protocols; empty means tools, or text for a model that cannot call
// tools.
const (
	ProtocolTools Protocol = "tools" // native tool calling
	ProtocolText  Protocol = "text"  // one fenced bash block per reply, for models without tool calling
)

// Repo names the repository a task works on.
type Repo struct {
	// URL is an https:// or file:// URL, or a local path.
	URL string `json:"url"`
	// Ref is a branch or tag; empty means the remote's default branch.
	Ref string `json:"ref,omitempty"`
	// Commit pins an exact commit (full or abbreviated sha).
	Commit string `json:"commit,omitempty"`
}

// Limits bound what one task may spend. Zero values mean "use the default".
type Limits struct {
	// MaxTurns caps model turns; -1 means unlimited under the hard cap.
	MaxTurns int `json:"max_turns,omitempty"`
	// MaxCostUSD caps the model spend in US dollars.
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
	// MaxTokens caps input plus output tokens over the run.
	MaxTokens int64 `json:"max_tokens,omitempty"`
	// Timeout caps the wall-clock time of the whole task.
	Timeout Duration `json:"timeout,omitempty"`
}

// SandboxOptions are per-task overrides of the sandbox defaults.
type SandboxOptions struct {
	// Network is "none" (default) or "bridge".
	Network string `json:"network,omitempty"`
	// MemoryMB is the memory limit in MiB.
	MemoryMB int64 `json:"memory_mb,omitempty"`
	// CPUs is the CPU limit (fractions allowed).
	CPUs float64 `json:"cpus,omitempty"`
	// Pids is the process-count limit.
	Pids int64 `json:"pids,omitempty"`
	// DiskMB limits what the sandbox may write to /workspace and tmpfs.
	DiskMB int64 `json:"disk_mb,omitempty"`
}

// Output says where a task's result is published besides the result store.
type Output struct {
	// PullRequest, when set, asks for a branch and pull request.
	PullRequest *PullRequest `json:"pull_request,omitempty"`
}

// PullRequest describes the pull request a GitHub task opens.
type PullRequest struct {
	// Base is the branch the pull request targets.
	Base string `json:"base,omitempty"`
	// Number, when set, is an existing pull request the task continues (a
	// follow-up asked for in a review): its result becomes a new commit on
	// the pull request's Branch instead of a new pull request.
	Number int `json:"number,omitempty"`
	// Branch is that pull request's head branch.
	Branch string `json:"branch,omitempty"`
}

// Source records where a task came from.
type Source struct {
	// Kind is cli, api, github or bench.
	Kind string `json:"kind,omitempty"`
	// Delivery is the webhook delivery id, for GitHub tasks.
	Delivery string `json:"delivery,omitempty"`
	// Issue is "owner/repo#N", for GitHub tasks: the issue, or the pull
	// request a follow-up was asked for on.
	Issue string `json:"issue,omitempty"`
	// ReviewComment is the id of the pull request review comment that
	// asked for a follow-up; its thread gets the answer.
	ReviewComment int64 `json:"review_comment,omitempty"`
}

// Duration is a time.Duration that reads and writes JSON as "30m".
type Duration time.Duration

// MarshalJSON writes d as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a Go duration string ("30m") or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("duration: want a string like \"30m\" or seconds, got %s", b)
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// NewID returns a fresh random task id ("t-" and 16 hex digits).
func NewID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "t-" + hex.EncodeToString(b[:])
}

// Decode parses task JSON strictly: unknown fields and trailing data are
// errors, so a typo in a field name is reported instead of ignored.
func Decode(data []byte) (Task, error) {
	var t Task
	dec := json.NewDecoder(bytesReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return Task{}, &ValidationError{Fields: []FieldError{{Field: "body", Problem: err.Error()}}}
	}
	if dec.More() {
		return Task{}, &ValidationError{Fields: []FieldError{{Field: "body", Problem: "trailing data after the task object"}}}
	}
	return t, nil
}
