// Package worker runs one task end to end: resolve the task's commit, read
// the repository's configuration under the server policy, prepare its
// sandbox on the repository's environment (a snapshot, or setup and a new
// snapshot), run the baseline tests, run the agent, verify, diff, and clean
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
	"github.com/wrenchworks/wrench/environment"
	"github.com/wrenchworks/wrench/policy"
	"github.com/wrenchworks/wrench/task"
)

// Sources resolves a task's commit in the host's mirror of its repository.
type Sources interface {
	Resolve(ctx context.Context, repo task.Repo) (Source, error)
}

// Source is a resolved commit: its files and objects, and a host clone of
// it for building an environment. Close releases the mirror.
//
// It has seven methods because one resolved commit serves two consumers:
// the environment build (the four of environment.Source, which is what it
// takes) and the worker (a file of the commit, a clone, the release).
type Source interface {
	environment.Source
	// ReadFile returns a file at the commit (at most max bytes), or an
	// error matching fs.ErrNotExist.
	ReadFile(path string, max int64) ([]byte, error)
	// Clone makes a host workspace of the commit (a miss exports it into
	// the setup sandbox).
	Clone(ctx context.Context, taskID string) (environment.Clone, error)
	Close()
}

// Environments prepares a task's sandbox on its environment
// (*environment.Builder).
type Environments interface {
	Prepare(ctx context.Context, req environment.Request) (*environment.Prepared, error)
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
	ID           string
	Sources      Sources
	Environments Environments
	Models       ModelOpener
	// Agent runs the loop; nil means agent.New with no price table.
	Agent AgentRunner
	// Policy is the server policy: limits, the test command of a repository
	// without one, egress, secrets. Nil means policy.Default for a local run.
	Policy *policy.Policy
	// Getenv reads the worker's environment, for the policy's secrets
	// (default os.Getenv).
	Getenv func(string) string
	// DefaultModel is used when a task names none.
	DefaultModel string
	// Runtime is the OCI runtime of sandboxes ("" is the engine's).
	Runtime string
	// Verify is when the agent runs the test command during the loop.
	Verify agent.VerifyPolicy
	// Approval and Approve say who approves changing tool calls (yolo, the
	// default, or confirm with an Approver, for `wrench run --approve`).
	Approval agent.ApprovalMode
	Approve  agent.Approver
	// OnLimit, when set, is asked whether a run that reached a limit goes
	// on (agent.Run.OnLimit; `wrench run` asks on a terminal). Nil stops.
	OnLimit func(agent.StopReason) bool
	// Secrets are redacted from trajectories and events.
	Secrets []string
	// Resumes, when set, keeps each running task's latest save point (at
	// every verified checkpoint and every SaveEvery turns), so that a
	// later attempt continues from it when the policy allows (resume).
	Resumes Resumes
	// SaveEvery is how many turns pass between save points without a
	// verified checkpoint (agent.DefaultSaveEvery).
	SaveEvery int
	// Budgets, when set, is the daily spend ledger the budgets of the
	// policy (policy.Policy.BudgetAccounts) are kept in: a task whose next
	// model call would cross one pauses (Report.Pause) with its work
	// saved. Nil applies no budget (`wrench run`).
	Budgets Ledger
	// BudgetAccounts, when set, says which budget accounts a task draws
	// on (default Policy.BudgetAccounts): a service passes its policy as
	// last reloaded.
	BudgetAccounts func(task.Task) []task.BudgetAccount
	// Now is the clock of budget days (default time.Now).
	Now func() time.Time
	// Reclaim, when set, removes what earlier attempts of a task left
	// (its containers and workspaces, wherever this worker's engine and
	// data dir see them) and says how many it removed; Run calls it first
	// on every attempt after the first.
	Reclaim func(ctx context.Context, taskID string) (int, error)
	// Health checks this worker's own infrastructure (its sandbox engine,
	// its default image, its disk); nil checks nothing. See [Worker.Probe].
	Health func(ctx context.Context) error
	Logger *slog.Logger
}

// Worker runs tasks. It is safe for concurrent use: each Run is independent.
type Worker struct {
	cfg Config
	log *slog.Logger
}

// Probe reports whether this worker's own infrastructure is usable
// (Config.Health). A dispatcher runs it (dispatcher.Prober) to tell a
// fault of this worker, which hands the task to another worker and stops
// this one taking tasks until the probe passes, from one that follows the
// task.
func (w *Worker) Probe(ctx context.Context) error {
	if w.cfg.Health == nil {
		return nil
	}
	return w.cfg.Health(ctx)
}

// New checks cfg and returns a Worker.
func New(cfg Config) (*Worker, error) {
	switch {
	case cfg.Sources == nil:
		return nil, errors.New("worker: Sources is required")
	case cfg.Environments == nil:
		return nil, errors.New("worker: Environments is required")
	case cfg.Models == nil:
		return nil, errors.New("worker: Models is required")
	}
	if cfg.Agent == nil {
		cfg.Agent = agent.New(agent.Config{})
	}
	if cfg.Policy == nil {
		cfg.Policy = policy.Default(policy.Options{Loopback: true})
	}
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.BudgetAccounts == nil {
		cfg.BudgetAccounts = cfg.Policy.BudgetAccounts
	}
	if cfg.ID == "" {
		host, _ := os.Hostname()
		cfg.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Worker{cfg: cfg, log: log}, nil
}
