package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/docker/docker/client"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/llm"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/docker"
	"github.com/wrenchworks/wrench/task"
	"github.com/wrenchworks/wrench/telemetry"
	"github.com/wrenchworks/wrench/worker"
	"github.com/wrenchworks/wrench/workspace"
)

// defaultImage is the sandbox image `wrench image build` produces.
const defaultImage = "wrench-sandbox:default"

// commonFlags are the flags every command that runs tasks shares.
type commonFlags struct {
	dataDir    string
	deployment string
	logLevel   string
	runtime    string
	agent      agentFlags
}

// agentFlags tune the agent itself.
type agentFlags struct {
	prompts        string
	subAgents      bool
	codeSearch     bool
	noDiagnostics  bool
	noProjectRules bool
}

// config builds the agent's configuration from the flags.
func (a agentFlags) config(prices map[string]agent.Price, log *slog.Logger) (agent.Config, error) {
	cfg := agent.Config{
		Prices:                prices,
		SubAgents:             agent.SubAgentConfig{Enabled: a.subAgents},
		CodeSearch:            a.codeSearch,
		Diagnostics:           agent.DiagnosticsConfig{Disabled: a.noDiagnostics},
		NoProjectInstructions: a.noProjectRules,
		Logger:                log,
	}
	if a.prompts != "" {
		if st, err := os.Stat(a.prompts); err != nil || !st.IsDir() {
			return cfg, &task.ValidationError{Fields: []task.FieldError{{Field: "--prompts", Problem: a.prompts + " is not a directory"}}}
		}
		ps, err := agent.LoadPromptSet(os.DirFS(a.prompts))
		if err != nil {
			return cfg, &task.ValidationError{Fields: []task.FieldError{{Field: "--prompts", Problem: err.Error()}}}
		}
		cfg.Prompts = ps
	}
	return cfg, nil
}

func (c *commonFlags) register(fs *flag.FlagSet, env *cliEnv) {
	fs.StringVar(&c.dataDir, "data-dir", env.getenv("WRENCH_DATA_DIR"), "where workspaces, mirrors and state live (default ~/.cache/wrench)")
	fs.StringVar(&c.deployment, "deployment", "local", "deployment name put on containers and workspaces (the reaper's scope)")
	fs.StringVar(&c.logLevel, "log-level", "warn", "log level on stderr: debug, info, warn, error")
	fs.StringVar(&c.agent.prompts, "prompts", "", "directory of prompt templates overriding the built-in ones (system.tmpl, instance.tmpl, …)")
	fs.BoolVar(&c.agent.subAgents, "subagents", false, "offer the agent a read-only research sub-agent")
	fs.BoolVar(&c.agent.codeSearch, "code-search", false, "offer the agent a ranked code search tool")
	fs.BoolVar(&c.agent.noDiagnostics, "no-diagnostics", false, "do not run syntax checks (gofmt -e, python ast) after writes")
	fs.BoolVar(&c.agent.noProjectRules, "no-project-instructions", false, "ignore AGENTS.md and .wrench/instructions.md in the repository")
	fs.StringVar(&c.runtime, "runtime", env.getenv("WRENCH_RUNTIME"), "OCI runtime of sandboxes, e.g. runsc for gVisor (default: the engine's)")
}

// resolvedDataDir is the data dir, defaulting to the user's cache directory.
func (c commonFlags) resolvedDataDir() (string, error) {
	if c.dataDir != "" {
		return absPath(c.dataDir)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find a data dir (set --data-dir): %w", err)
	}
	return filepath.Join(base, "wrench"), nil
}

func (c commonFlags) logger(env *cliEnv) *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.logLevel)); err != nil {
		lvl = slog.LevelWarn
	}
	return slog.New(telemetry.NewLogHandler(env.stderr, &slog.HandlerOptions{Level: lvl}))
}

// workerOptions are what differs between the commands that build a worker.
type workerOptions struct {
	common     commonFlags
	image      string
	verify     agent.VerifyPolicy
	network    string
	warm       int
	deployment string
	// approval and approve are for `wrench run --approve confirm`.
	approval agent.ApprovalMode
	approve  agent.Approver
}

// secretEnv names the environment variables whose values never reach a
// sandbox, a log line or a trajectory.
var secretEnv = []string{"WRENCH_LLM_API_KEY", "OPENAI_API_KEY", "WRENCH_GIT_TOKEN", "GITHUB_TOKEN", "WRENCH_API_TOKEN"}

func secrets(env *cliEnv) []string {
	var out []string
	for _, k := range secretEnv {
		if v := env.getenv(k); len(v) >= 6 {
			out = append(out, v)
		}
	}
	return out
}

// newWorker wires a worker from configuration: workspaces under the data
// dir, the Docker sandbox provider, the model opener and the agent. cleanup
// releases what it started.
func newWorker(ctx context.Context, env *cliEnv, o workerOptions) (*worker.Worker, func(), error) {
	log := o.common.logger(env)
	dataDir, err := o.common.resolvedDataDir()
	if err != nil {
		return nil, nil, err
	}
	wsm, err := workspace.NewManager(workspace.Config{
		Root:       filepath.Join(dataDir, "workspaces"),
		MirrorDir:  filepath.Join(dataDir, "mirrors"),
		Deployment: o.deployment,
		Owner:      &workspace.Owner{UID: 1000, GID: 1000},
		Logger:     log,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("workspaces: %w", err)
	}
	shim, err := installShim(dataDir)
	if err != nil {
		return nil, nil, err
	}
	dc, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, nil, &sandbox.Error{Kind: sandbox.ErrUnavailable, Op: "connect", Err: err}
	}
	prov, err := docker.New(ctx, docker.Config{Client: dc, Deployment: o.deployment, DefaultImage: defaultImage,
		ShimPath: shim, Runtime: o.common.runtime, Logger: log})
	if err != nil {
		dc.Close()
		return nil, nil, err
	}
	// Whatever a crashed wrench of this deployment left behind goes now,
	// and again every minute while this one runs.
	stopReap := startReaper(ctx, wsm, o.deployment, nil, log)
	closeAll := func() {
		stopReap()
		_ = prov.Close()
		_ = dc.Close()
	}
	var auth *workspace.Auth
	if tok := firstNonEmpty(env.getenv("WRENCH_GIT_TOKEN"), env.getenv("GITHUB_TOKEN")); tok != "" {
		auth = &workspace.Auth{Token: tok}
	}
	acfg, err := o.common.agent.config(llm.DefaultPrices().AgentPrices(), log)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	ag := agent.New(acfg)
	if err := ag.Validate(); err != nil {
		closeAll()
		return nil, nil, &task.ValidationError{Fields: []task.FieldError{{Field: "--prompts", Problem: err.Error()}}}
	}
	wcfg := worker.Config{
		Workspaces:   workspaceOpener{m: wsm, auth: auth},
		Sandboxes:    prov,
		Models:       modelOpener(env),
		Agent:        ag,
		Approval:     o.approval,
		Approve:      o.approve,
		DefaultImage: firstNonEmpty(o.image, defaultImage),
		Verify:       o.verify,
		Sandbox:      worker.SandboxDefaults{Network: o.network, Runtime: o.common.runtime},
		Secrets:      secrets(env),
		Logger:       log,
	}
	w, err := worker.New(wcfg)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	if o.warm <= 0 {
		return w, closeAll, nil
	}
	// A warm pool starts sandboxes shaped like a task that overrides
	// nothing; the worker clones into a pooled sandbox's directory.
	p, stopPool, err := startPool(prov, dataDir, o.warm, w.SandboxTemplate(), log)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	wcfg.Pool = poolAdapter{p}
	if w, err = worker.New(wcfg); err != nil {
		stopPool()
		closeAll()
		return nil, nil, err
	}
	return w, func() { stopPool(); closeAll() }, nil
}

// workspaceOpener adapts the go-git workspace manager to the worker,
// classifying clone errors as the task's fault or a passing one.
type workspaceOpener struct {
	m    *workspace.Manager
	auth *workspace.Auth
}

func (o workspaceOpener) Open(ctx context.Context, taskID string, repo task.Repo) (worker.Workspace, error) {
	ws, err := o.m.Open(ctx, taskID, repo, o.auth)
	if err != nil {
		return nil, classifyClone(err)
	}
	return ws, nil
}

// classifyClone marks a clone error as the task's fault or a passing one.
func classifyClone(err error) error {
	var ce *workspace.CloneError
	if errors.As(err, &ce) {
		if ce.Retriable {
			return &worker.TransientError{Err: err}
		}
		return &worker.InputError{Err: err}
	}
	return err
}

// OpenIn clones into a warm sandbox's directory.
func (o workspaceOpener) OpenIn(ctx context.Context, taskID, dir string, repo task.Repo) (worker.Workspace, error) {
	ws, err := o.m.OpenIn(ctx, taskID, dir, repo, o.auth)
	if err != nil {
		return nil, classifyClone(err)
	}
	return ws, nil
}

func modelOpener(env *cliEnv) worker.ModelOpener {
	return func(ctx context.Context, spec string) (agent.Model, string, func() error, error) {
		if spec == humanModel {
			return agent.NewHumanModel(env.stdin, env.stderr), humanModel, nil, nil
		}
		m, name, closeFn, err := llm.Open(ctx, spec, llm.OpenConfig{Getenv: env.getenv})
		var se *llm.SpecError
		if errors.As(err, &se) {
			return nil, "", nil, &worker.InputError{Err: err}
		}
		return m, name, closeFn, err
	}
}

// humanModel is the --model value with which a person at the terminal
// plays the model (seed 002's human mode).
const humanModel = "human"

// checkModelSpec rejects a --model value that can never work before any
// container starts.
func checkModelSpec(ctx context.Context, spec string, env *cliEnv) error {
	if spec == humanModel {
		return nil
	}
	_, _, closeFn, err := llm.Open(ctx, spec, llm.OpenConfig{Getenv: env.getenv})
	if closeFn != nil {
		_ = closeFn()
	}
	return err
}

// exitCodeFor maps a setup error to an exit code.
func exitCodeFor(err error) int {
	switch sandbox.KindOf(err) {
	case sandbox.ErrInvalid:
		return exitBadInput
	}
	var ve *task.ValidationError
	if errors.As(err, &ve) {
		return exitBadInput
	}
	return exitInfra
}

func absPath(p string) (string, error) {
	if strings.HasPrefix(p, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		p = filepath.Join(home, p[2:])
	}
	return filepath.Abs(p)
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
