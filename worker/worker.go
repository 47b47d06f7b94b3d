// Package worker runs one task end to end: clone the repository, start a
// sandbox, run the baseline tests, run the agent, verify, diff, and clean
// up. It is the one place that wires agent, sandbox, workspace and model
// together; each of those reaches it through an interface defined here.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

// Workspaces opens a fresh git workspace for a task.
type Workspaces interface {
	Open(ctx context.Context, taskID string, repo task.Repo) (Workspace, error)
}

// Workspace is one task's clone on the host.
type Workspace interface {
	agent.Checkpointer
	// Dir is the host directory mounted into the sandbox.
	Dir() string
	// BaseCommit is the commit the patch applies to.
	BaseCommit() string
	// Close removes the workspace; it is idempotent.
	Close() error
}

// AgentRunner runs the agent loop; *agent.Agent implements it.
type AgentRunner interface {
	Run(ctx context.Context, r *agent.Run) (*agent.Outcome, error)
}

// ModelOpener turns a task's model spec ("" for the default, a model name,
// or "scripted:FILE") into a Model. close releases what it started.
type ModelOpener func(ctx context.Context, spec string) (m agent.Model, name string, close func() error, err error)

// Config wires a Worker.
type Config struct {
	// ID names this worker in results and logs.
	ID         string
	Workspaces Workspaces
	Sandboxes  sandbox.Provider
	// Pool, when set, hands out warm sandboxes instead of starting one per
	// task; Workspaces must then implement DirWorkspaces.
	Pool   SandboxPool
	Models ModelOpener
	// Agent runs the loop; nil means agent.New with no price table.
	Agent AgentRunner
	// DefaultImage is used when a task names none.
	DefaultImage string
	// DefaultModel is used when a task names none.
	DefaultModel string
	// DefaultLimits fill what a task leaves zero.
	DefaultLimits task.Limits
	// Sandbox holds the default resource limits.
	Sandbox SandboxDefaults
	// TestTimeout bounds one run of the test command (default 10m).
	TestTimeout time.Duration
	// Verify is when the agent runs the test command during the loop.
	Verify agent.VerifyPolicy
	// Approval and Approve say who approves changing tool calls (yolo, the
	// default, or confirm with an Approver, for `wrench run --approve`).
	Approval agent.ApprovalMode
	Approve  agent.Approver
	// Secrets are redacted from trajectories and events.
	Secrets []string
	Logger  *slog.Logger
}

// SandboxDefaults are the resource limits of a task that sets none.
type SandboxDefaults struct {
	MemoryMB int64
	CPUs     float64
	Pids     int64
	DiskMB   int64
	Network  string
	Runtime  string
	Env      map[string]string
}

// Worker runs tasks. It is safe for concurrent use: each Run is independent.
type Worker struct {
	cfg Config
	log *slog.Logger
}

// New checks cfg and returns a Worker.
func New(cfg Config) (*Worker, error) {
	switch {
	case cfg.Workspaces == nil:
		return nil, errors.New("worker: Workspaces is required")
	case cfg.Sandboxes == nil:
		return nil, errors.New("worker: Sandboxes is required")
	case cfg.Models == nil:
		return nil, errors.New("worker: Models is required")
	}
	if _, ok := cfg.Workspaces.(DirWorkspaces); cfg.Pool != nil && !ok {
		return nil, errPoolNeedsDirWorkspaces
	}
	if cfg.Agent == nil {
		cfg.Agent = agent.New(agent.Config{})
	}
	if cfg.ID == "" {
		host, _ := os.Hostname()
		cfg.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if cfg.TestTimeout == 0 {
		cfg.TestTimeout = 10 * time.Minute
	}
	if cfg.DefaultLimits.Timeout == 0 {
		cfg.DefaultLimits.Timeout = task.Duration(30 * time.Minute)
	}
	if cfg.DefaultLimits.MaxTurns == 0 {
		cfg.DefaultLimits.MaxTurns = 50
	}
	if cfg.Sandbox.MemoryMB == 0 {
		cfg.Sandbox.MemoryMB = 2048
	}
	if cfg.Sandbox.CPUs == 0 {
		cfg.Sandbox.CPUs = 2
	}
	if cfg.Sandbox.Pids == 0 {
		cfg.Sandbox.Pids = 512
	}
	if cfg.Sandbox.DiskMB == 0 {
		cfg.Sandbox.DiskMB = 2048
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Worker{cfg: cfg, log: log}, nil
}
