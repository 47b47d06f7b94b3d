package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/egress"
	"github.com/wrenchworks/wrench/environment"
	"github.com/wrenchworks/wrench/llm"
	"github.com/wrenchworks/wrench/policy"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/docker"
	"github.com/wrenchworks/wrench/sandbox/pool"
	"github.com/wrenchworks/wrench/task"
	"github.com/wrenchworks/wrench/telemetry"
	"github.com/wrenchworks/wrench/worker"
	"github.com/wrenchworks/wrench/workspace"
)

// defaultImage is the sandbox image `wrench image build` produces.
const defaultImage = sandbox.DefaultImage

// commonFlags are the flags every command that runs tasks shares.
type commonFlags struct {
	dataDir    string
	policy     string
	envMaxSize string
	sandboxCA  string
	deployment string
	logLevel   string
	runtime    string
	agent      agentFlags
}

// agentFlags tune the agent itself.
type agentFlags struct {
	prompts        string
	prices         string
	subAgents      bool
	codeSearch     bool
	noDiagnostics  bool
	noProjectRules bool
	maxOutput      int
}

// config builds the agent's configuration from the flags.
func (a agentFlags) config(log *slog.Logger) (agent.Config, error) {
	prices := llm.DefaultPrices()
	if a.prices != "" {
		override, err := llm.LoadPrices(a.prices)
		if err != nil {
			return agent.Config{}, &task.ValidationError{Fields: []task.FieldError{{Field: "--prices", Problem: err.Error()}}}
		}
		maps.Copy(prices, override)
	}
	cfg := agent.Config{
		Prices:                prices,
		SubAgents:             agent.SubAgentConfig{Enabled: a.subAgents},
		CodeSearch:            a.codeSearch,
		Diagnostics:           agent.DiagnosticsConfig{Disabled: a.noDiagnostics},
		NoProjectInstructions: a.noProjectRules,
		MaxOutputTokens:       a.maxOutput,
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
	fs.StringVar(&c.dataDir, "data-dir", env.getenv("WRENCH_DATA_DIR"), "where workspaces, mirrors and state live (default $WRENCH_DATA_DIR, else ~/.cache/wrench)")
	fs.StringVar(&c.deployment, "deployment", "local", "deployment name put on containers and workspaces (the reaper's scope)")
	fs.StringVar(&c.logLevel, "log-level", "warn", "log level on stderr: debug, info, warn, error")
	fs.StringVar(&c.agent.prompts, "prompts", "", "directory of prompt templates overriding the built-in ones (system.tmpl, instance.tmpl, …)")
	fs.StringVar(&c.agent.prices, "prices", "", "YAML or JSON file of model prices per million tokens, over the built-in list (see docs/operations.md)")
	fs.BoolVar(&c.agent.subAgents, "subagents", false, "offer the agent a read-only research sub-agent")
	fs.BoolVar(&c.agent.codeSearch, "code-search", false, "offer the agent a ranked code search tool")
	fs.BoolVar(&c.agent.noDiagnostics, "no-diagnostics", false, "do not run syntax checks (gofmt -e, python ast) after writes")
	fs.BoolVar(&c.agent.noProjectRules, "no-project-instructions", false, "ignore AGENTS.md and .wrench/instructions.md in the repository")
	fs.IntVar(&c.agent.maxOutput, "max-output-tokens", agent.DefaultMaxOutputTokens, "cap on each model reply's tokens on tasks a daily budget applies to (sent as max_completion_tokens); the worst case each call reserves")
	fs.StringVar(&c.runtime, "runtime", env.getenv("WRENCH_RUNTIME"), "OCI runtime of sandboxes, e.g. runsc for gVisor (default $WRENCH_RUNTIME, else the engine's)")
	fs.StringVar(&c.sandboxCA, "sandbox-ca", env.getenv("WRENCH_SANDBOX_CA"), "PEM file of the CA certificates sandboxes' TLS clients trust (the complete trust store), for an egress path that re-signs TLS (default $WRENCH_SANDBOX_CA; none: the image's own)")
	fs.StringVar(&c.envMaxSize, "env-max-size", "20GiB", "size budget of environment snapshots (what they add to their base images); the least recently used beyond it are pruned after each new one")
	fs.StringVar(&c.policy, "policy", env.getenv("WRENCH_POLICY"), "server policy file: limits, egress, secrets, allowed repositories and models (see docs/environments.md; default $WRENCH_POLICY, else the built-in policy)")
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
	// loopback says the API (if any) listens on loopback only, which the
	// built-in policy's defaults depend on.
	loopback bool
	// approval and approve are for `wrench run --approve confirm`.
	approval agent.ApprovalMode
	approve  agent.Approver
	// onLimit is for `wrench run --on-limit ask` on a terminal.
	onLimit func(agent.StopReason) bool
	// credentials and caBundle reach the GitHub host (nil: none).
	credentials workspace.Credentials
	caBundle    []byte
	// checkMounts checks at start that the engine sees the paths sandboxes
	// bind-mount (serve and worker, which may run in a container).
	checkMounts bool
	// minFreeDisk is the free space the data dir's disk needs for the
	// worker to take tasks (0: not checked).
	minFreeDisk int64
	// link is what the worker learns once serve or worker has its queue
	// (nil: nothing).
	link *queueLink
	// flagSecrets are the values of secret-bearing flags (--github-token,
	// serve's --token and --github-webhook-secret), redacted like the
	// secret environment variables' values.
	flagSecrets []string
}

// checkMounts fails when the engine cannot see the paths under dataDir
// that sandboxes bind-mount (the shim's copy, the workspaces, the warm
// pool's directories) at the same paths as this process: every task would
// fail otherwise. When it cannot tell (engine down, image missing) it only
// warns: those are reported again, per task, when they matter.
func checkMounts(ctx context.Context, prov *docker.Provider, dataDir string, log *slog.Logger) error {
	// Workspaces live in the sandboxes; what a sandbox mounts from this
	// host is the shim binary and its egress proxy's socket directory.
	egressDir := filepath.Join(dataDir, "egress")
	if err := os.MkdirAll(egressDir, 0o755); err != nil {
		return fmt.Errorf("egress: %w", err)
	}
	sources := []string{egressDir}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := prov.CheckBindSources(cctx, sources...)
	var hidden *docker.HiddenPathsError
	if errors.As(err, &hidden) {
		return err
	}
	if err != nil {
		log.Warn("could not check that the docker engine sees the data directory at the same path", "err", err)
	}
	return nil
}

// gitAuth is the token for https clones from the environment, bound to the
// hosts it belongs to: WRENCH_GIT_TOKEN to WRENCH_GIT_TOKEN_HOSTS
// (comma-separated, default github.com), else GITHUB_TOKEN to github.com.
// A task naming another host gets no token.
func gitAuth(env *cliEnv) *workspace.Auth {
	if tok := env.getenv("WRENCH_GIT_TOKEN"); tok != "" {
		hosts := []string{defaultGitHost}
		if v := strings.TrimSpace(env.getenv("WRENCH_GIT_TOKEN_HOSTS")); v != "" {
			hosts = strings.Split(v, ",")
		}
		return &workspace.Auth{Token: tok, Hosts: hosts}
	}
	if tok := env.getenv("GITHUB_TOKEN"); tok != "" {
		return &workspace.Auth{Token: tok, Hosts: []string{defaultGitHost}}
	}
	return nil
}

// defaultGitHost is where an environment git token goes unless told
// otherwise.
const defaultGitHost = "github.com"

// secretEnv names the environment variables whose values never reach a
// sandbox, a log line or a trajectory.
var secretEnv = []string{"WRENCH_LLM_API_KEY", "OPENAI_API_KEY", "WRENCH_GIT_TOKEN", "GITHUB_TOKEN", "WRENCH_API_TOKEN", "WRENCH_GITHUB_WEBHOOK_SECRET"}

// secrets are the values the worker of o redacts.
func (o workerOptions) secrets(env *cliEnv) []string { return secrets(env, o.flagSecrets...) }

// secrets are the values a worker redacts: those of secretEnv and the
// secret-bearing flags given (flagValues), each once; values shorter than
// 6 characters are left out (redacting them would garble ordinary text).
func secrets(env *cliEnv, flagValues ...string) []string {
	var out []string
	add := func(v string) {
		if len(v) >= 6 && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	for _, k := range secretEnv {
		add(env.getenv(k))
	}
	for _, v := range flagValues {
		add(v)
	}
	return out
}

// loadPolicy reads --policy (or the built-in default) and applies the
// flags that widen it: --image names the default base image, --network
// bridge lets tasks ask for a bridged network.
func loadPolicy(o workerOptions) (*policy.Policy, error) {
	pol, err := policy.Load(o.common.policy, policy.Options{Loopback: o.loopback})
	if err != nil {
		return nil, &task.ValidationError{Fields: []task.FieldError{{Field: "--policy", Problem: err.Error()}}}
	}
	if o.image != "" {
		pol.Defaults.Image = o.image
	}
	if o.network == "bridge" {
		t := true
		pol.Defaults.NetworkBridge = &t
	}
	return pol, nil
}

// newWorker wires a worker from configuration: mirrors and host clones
// under the data dir, the Docker sandbox provider, environment snapshots,
// the model opener and the agent. cleanup releases what it started.
func newWorker(ctx context.Context, env *cliEnv, o workerOptions) (*worker.Worker, func(), error) {
	log := o.common.logger(env)
	dataDir, err := o.common.resolvedDataDir()
	if err != nil {
		return nil, nil, err
	}
	pol, err := loadPolicy(o)
	if err != nil {
		return nil, nil, err
	}
	o.link.setPolicy(pol, func() (*policy.Policy, error) { return loadPolicy(o) })
	wsm, err := workspace.NewManager(workspace.Config{
		Root:        filepath.Join(dataDir, "workspaces"),
		MirrorDir:   filepath.Join(dataDir, "mirrors"),
		Deployment:  o.deployment,
		Logger:      log,
		Credentials: o.credentials,
		CABundle:    o.caBundle,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("workspaces: %w", err)
	}
	shim, releaseShim, err := installShim(dataDir, log)
	if err != nil {
		return nil, nil, err
	}
	eng, err := docker.FromEnv()
	if err != nil {
		releaseShim()
		return nil, nil, err
	}
	prov, err := docker.New(ctx, docker.Config{Engine: eng, Deployment: o.deployment, DefaultImage: firstNonEmpty(o.image, defaultImage),
		ShimPath: shim, Runtime: o.common.runtime, Logger: log})
	if err != nil {
		eng.Close()
		releaseShim()
		return nil, nil, err
	}
	if o.checkMounts {
		if err := checkMounts(ctx, prov, dataDir, log); err != nil {
			prov.Close()
			eng.Close()
			releaseShim()
			return nil, nil, err
		}
	}
	// Whatever a crashed wrench of this deployment left behind goes now,
	// and again every minute while this one runs.
	reap, stopReap := startReaper(ctx, eng, wsm, o.deployment, nil, o.link, log)
	closers := []func(){releaseShim, func() { _ = eng.Close() }, func() { _ = prov.Close() }, stopReap}
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	auth := gitAuth(env)
	acfg, err := o.common.agent.config(log)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	ag := agent.New(acfg)
	if err := ag.Validate(); err != nil {
		closeAll()
		return nil, nil, &task.ValidationError{Fields: []task.FieldError{{Field: "--prompts", Problem: err.Error()}}}
	}
	envs, stopEnvs, err := newEnvironments(prov, pol, dataDir, o, log)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	closers = append(closers, stopEnvs)
	w, err := worker.New(worker.Config{
		Sources:      worker.MirrorSources(wsm, auth),
		Environments: envs,
		Models:       modelOpener(env),
		Agent:        ag,
		Policy:       pol,
		Getenv:       env.getenv,
		Runtime:      o.common.runtime,
		Approval:     o.approval,
		Approve:      o.approve,
		OnLimit:      o.onLimit,
		Verify:       o.verify,
		Secrets:      o.secrets(env),
		Health:       infraProbe(prov, pol, dataDir, o.minFreeDisk),
		Reclaim:      reclaim(reap),
		Resumes:      resumesOf(o.link),
		// Budgets: the queue's ledger and the policy as last reloaded.
		Budgets:        budgetsOf(o.link),
		BudgetAccounts: accountsOf(o.link),
		Logger:         log,
	})
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	return w, closeAll, nil
}

// newEnvironments wires environment snapshots: the store in the data dir
// and, with --warm, a pool of sandboxes of the most used snapshots shaped
// like a task that overrides no limit.
func newEnvironments(prov *docker.Provider, pol *policy.Policy, dataDir string, o workerOptions, log *slog.Logger) (*environment.Builder, func(), error) {
	store, err := environment.NewStore(prov, filepath.Join(dataDir, "environments"), o.deployment)
	if err != nil {
		return nil, nil, err
	}
	budget, err := parseSize(o.common.envMaxSize)
	if err != nil {
		return nil, nil, &task.ValidationError{Fields: []task.FieldError{{Field: "--env-max-size", Problem: err.Error()}}}
	}
	// Every sandbox reaches the network only through the worker's audited
	// egress proxy, one session per sandbox under <data>/egress.
	sessions := &egress.Sessions{Dir: filepath.Join(dataDir, "egress"), Logger: log}
	if o.common.sandboxCA != "" {
		ca, err := os.ReadFile(o.common.sandboxCA)
		if err != nil {
			return nil, nil, &task.ValidationError{Fields: []task.FieldError{{Field: "--sandbox-ca", Problem: err.Error()}}}
		}
		sessions.CABundle = ca
	}
	cfg := environment.Config{Sandboxes: prov, Images: prov, Snapshots: prov, Store: store, MaxBytes: budget, Egress: sessions, Logger: log}
	stop := func() {}
	if o.warm > 0 {
		l := pol.Defaults.Limits
		tmpl := sandbox.Spec{WritableRoot: true, Network: "none", MemoryBytes: l.MemoryMB << 20, NanoCPUs: int64(l.CPUs * 1e9),
			Pids: l.Pids, DiskBytes: l.DiskMB << 20, Runtime: o.common.runtime}
		// A warm sandbox gets an agent-phase egress session with nothing
		// allowed; the task it is handed to gets the session.
		beforeStart := func(ctx context.Context, spec *sandbox.Spec) (func(), error) {
			dir, done, err := sessions.Open(ctx, pool.WarmTaskID, egress.PhaseAgent, nil, nil)
			if err != nil {
				return nil, err
			}
			spec.EgressDir = dir
			return func() { done() }, nil
		}
		p, err := pool.New(prov, pool.Config{Size: 1, Template: tmpl, BeforeStart: beforeStart, Logger: log})
		if err != nil {
			return nil, nil, fmt.Errorf("warm pool: %w", err)
		}
		cfg.Pool, cfg.WarmSnapshots = p, o.warm
		stop = func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := p.Close(ctx); err != nil {
				log.Warn("close warm pool", "err", err)
			}
		}
	}
	b, err := environment.NewBuilder(cfg)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return b, stop, nil
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
// plays the model (agent.HumanModel).
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
