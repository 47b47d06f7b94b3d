package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/task"
)

// runFlags are the flags of `wrench run`.
type runFlags struct {
	repo, ref, commit string
	instruction       string
	testCmd           string
	model, protocol   string
	out, trajectory   string
	image, network    string
	verify            string
	maxTurns          int
	maxCost           float64
	timeout           time.Duration
	jsonOut, quiet    bool
	approve, mode     string
	onLimit           string
	tools             string
	planFirst         bool
	maxTokens         int64
	common            commonFlags
}

func cmdRun(ctx context.Context, env *cliEnv, args []string) int {
	var f runFlags
	fs := flag.NewFlagSet("wrench run", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	f.register(fs, env)
	pos, code, ok := parseCommand(env, fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		fmt.Fprintf(env.stderr, "wrench run: unexpected argument %q\n", pos[0])
		return exitBadInput
	}
	t, err := f.task(env)
	if err == nil {
		err = errors.Join(checkWritable("--out", f.out), checkWritable("--trajectory", f.trajectory))
	}
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench run: %v\n", err)
		return exitBadInput
	}
	switch agent.VerifyPolicy(f.verify) {
	case agent.VerifyOnFinish, agent.VerifyAfterWrite, agent.VerifyNever:
	default:
		fmt.Fprintf(env.stderr, "wrench run: --verify %q is not one of finish, after_write, never\n", f.verify)
		return exitBadInput
	}
	// One reader of the terminal for every prompt (approvals, limits, the
	// human model), so none loses what another buffered.
	in := bufio.NewReader(env.stdin)
	onLimit, err := onLimitFor(f.onLimit, in, env, t.Limits)
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench run: %v\n", err)
		return exitBadInput
	}
	prompts := *env
	prompts.stdin = in
	env = &prompts
	var approve agent.Approver
	switch agent.ApprovalMode(f.approve) {
	case agent.ApproveYolo:
	case agent.ApproveConfirm:
		approve = agent.PromptApprover(in, env.stderr)
	default:
		fmt.Fprintf(env.stderr, "wrench run: --approve %q is not one of yolo, confirm\n", f.approve)
		return exitBadInput
	}
	if err := checkModelSpec(ctx, t.Model, env); err != nil {
		fmt.Fprintf(env.stderr, "wrench run: %v\n", err)
		return exitBadInput
	}

	w, cleanup, err := newWorker(ctx, env, workerOptions{
		common:     f.common,
		image:      f.image,
		verify:     agent.VerifyPolicy(f.verify),
		network:    f.network,
		warm:       0,
		deployment: f.common.deployment,
		approval:   agent.ApprovalMode(f.approve),
		approve:    approve,
		onLimit:    onLimit,
		// No API: the person running it may name local paths and scripts.
		loopback: true,
	})
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench run: %v\n", err)
		return exitCodeFor(err)
	}
	defer cleanup()

	var progress func(task.Event)
	if !f.quiet {
		progress = progressPrinter(env.stderr, isTerminal(env.stderr, env))
	}
	rep := w.Run(ctx, t, 1, progress)
	res := rep.Result
	written := writeRunOutput(env, f, res, rep.Artifacts["trajectory.jsonl"])
	fmt.Fprintln(env.stderr, outcomeLine(res))
	if !written {
		return exitInfra
	}
	return res.Status.ExitCode()
}

// register defines `wrench run`'s flags on fs.
func (f *runFlags) register(fs *flag.FlagSet, env *cliEnv) {
	fs.StringVar(&f.repo, "repo", "", "repository: a local path, file:// or https:// URL (required)")
	fs.StringVar(&f.ref, "ref", "", "branch or tag to check out (default: the remote's HEAD)")
	fs.StringVar(&f.commit, "commit", "", "exact commit to check out")
	fs.StringVar(&f.instruction, "task", "", "what to do (required; @FILE reads it from a file)")
	fs.StringVar(&f.testCmd, "test", "", "test command that verifies the work, run in the sandbox")
	fs.StringVar(&f.model, "model", "", "model name, scripted:FILE for the scripted model, or human to type the replies yourself (default $WRENCH_LLM_MODEL, else gpt-4.1)")
	fs.StringVar(&f.protocol, "protocol", "", "tools (default) or text, for models without tool calling")
	fs.StringVar(&f.out, "out", "", "write the patch to FILE instead of stdout")
	fs.StringVar(&f.trajectory, "trajectory", "", "write the JSONL trajectory to FILE")
	fs.StringVar(&f.image, "image", "", "sandbox image (default "+defaultImage+")")
	fs.StringVar(&f.network, "network", "", "sandbox network: none (default) or bridge")
	fs.StringVar(&f.verify, "verify", "finish", "when the agent runs the tests: finish, after_write or never")
	fs.IntVar(&f.maxTurns, "max-turns", 0, "model turns at most (-1 unlimited under the hard cap; default 50)")
	fs.Float64Var(&f.maxCost, "max-cost", 0, "model spend at most, in USD (default: no limit)")
	fs.DurationVar(&f.timeout, "timeout", 0, "wall-clock limit of the whole task (default 30m)")
	fs.Int64Var(&f.maxTokens, "max-tokens", 0, "input plus output tokens at most (default: no limit)")
	fs.StringVar(&f.approve, "approve", "yolo", "who approves commands and edits: yolo (nobody) or confirm (ask on the terminal)")
	fs.StringVar(&f.onLimit, "on-limit", onLimitAsk, "at a turn, cost, token or malformed-reply limit: ask (on a terminal: go on with as much again? otherwise stop) or stop")
	fs.StringVar(&f.mode, "mode", "", "plan: read-only tools, investigate and report without changing anything")
	fs.BoolVar(&f.planFirst, "plan-first", false, "make a read-only plan before working")
	fs.StringVar(&f.tools, "tools", "", "comma-separated tool allowlist (default: every tool)")
	fs.BoolVar(&f.jsonOut, "json", false, "print the result object as JSON on stdout")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress lines on stderr")
	f.common.register(fs, env)
}

// task builds the Task from the flags, checking what the flags alone can.
func (f *runFlags) task(env *cliEnv) (task.Task, error) {
	if f.repo == "" {
		return task.Task{}, errors.New("--repo is required")
	}
	instr, err := readInstruction(f.instruction)
	if err != nil {
		return task.Task{}, err
	}
	if strings.TrimSpace(instr) == "" {
		return task.Task{}, errors.New("--task is required and must not be empty")
	}
	repoURL, err := normalizeRepo(f.repo)
	if err != nil {
		return task.Task{}, err
	}
	model := f.model
	t := task.Task{
		ID:           task.NewID(),
		Repo:         task.Repo{URL: repoURL, Ref: f.ref, Commit: f.commit},
		Instruction:  instr,
		TestCommand:  f.testCmd,
		Image:        f.image,
		Model:        model,
		Protocol:     task.Protocol(f.protocol),
		Limits:       task.Limits{MaxTurns: f.maxTurns, MaxCostUSD: f.maxCost, MaxTokens: f.maxTokens, Timeout: task.Duration(f.timeout)},
		Mode:         task.Mode(f.mode),
		PlanFirst:    f.planFirst,
		AllowedTools: splitList(f.tools),
		Sandbox:      task.SandboxOptions{Network: f.network},
		Source:       task.Source{Kind: "cli"},
		CreatedAt:    time.Now().UTC(),
	}
	return t, checkTask(&t, runFlagOf)
}

// readInstruction returns the --task value, or the file it names as @FILE.
func readInstruction(v string) (string, error) {
	if !strings.HasPrefix(v, "@") {
		return v, nil
	}
	b, err := os.ReadFile(v[1:])
	if err != nil {
		return "", fmt.Errorf("read --task file: %w", err)
	}
	return string(b), nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// normalizeRepo turns a local path into an absolute path and checks that it
// exists, so a typo is reported before anything starts.
func normalizeRepo(repo string) (string, error) {
	if strings.Contains(repo, "://") {
		return repo, nil
	}
	abs, err := absPath(repo)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("repository %s: %w", repo, err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("repository %s: not a directory", repo)
	}
	return abs, nil
}

// outcomeLine is the one-line summary printed on stderr.
func outcomeLine(r task.Result) string {
	u := r.Usage
	s := fmt.Sprintf("wrench: %s in %s — %d turns, %d tool calls, %d tokens (%d in, %d out), $%.4f",
		r.Status, r.Timings.Total.Round(10*time.Millisecond), u.Turns, u.ToolCalls,
		u.InputTokens+u.OutputTokens, u.InputTokens, u.OutputTokens, u.CostUSD)
	if r.TestsBefore != nil || r.TestsAfter != nil {
		s += fmt.Sprintf("; tests %s → %s", passFail(r.TestsBefore), passFail(r.TestsAfter))
	}
	if r.Reason != "" {
		s += "; " + r.Reason
	}
	return s
}

func passFail(tr *task.TestRun) string {
	switch {
	case tr == nil:
		return "not run"
	case tr.Passed:
		return "pass"
	}
	return "fail"
}
