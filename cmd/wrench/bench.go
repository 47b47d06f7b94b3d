package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/bench"
	"github.com/wrenchworks/wrench/bench/mine"
	"github.com/wrenchworks/wrench/github"
	"github.com/wrenchworks/wrench/task"
)

const benchUsage = `usage: wrench bench <mine|run|compare> [flags]

  mine     find instances in a repository's history and validate them
  run      run instances through the queue and workers, grade and report
  compare  compare two runs instance by instance

Run 'wrench bench <command> -h' for its flags; docs/bench.md explains.`

// cmdBench is `wrench bench`: a private benchmark from a repository's own
// history, run through the production path (docs/bench.md).
func cmdBench(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(env.stderr, benchUsage)
		return exitBadInput
	}
	switch args[0] {
	case "mine":
		return cmdBenchMine(ctx, env, args[1:])
	case "run":
		return cmdBenchRun(ctx, env, args[1:])
	case "compare":
		return cmdBenchCompare(env, args[1:])
	case "-h", "--help", "help":
		fmt.Fprintln(env.stdout, benchUsage)
		return exitOK
	}
	fmt.Fprintf(env.stderr, "wrench bench: unknown command %q\n\n%s\n", args[0], benchUsage)
	return exitBadInput
}

// benchMineFlags are the flags of `wrench bench mine`.
type benchMineFlags struct {
	common      commonFlags
	repo, name  string
	since       string
	max         int
	concurrency int
	out, report string
	noValidate  bool
	confirm     bool
	image       string
	timeout     time.Duration
	github      githubFlags
}

func cmdBenchMine(ctx context.Context, env *cliEnv, args []string) int {
	var f benchMineFlags
	fs := flag.NewFlagSet("wrench bench mine", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	f.common.register(fs, env)
	fs.StringVar(&f.repo, "repo", "", "repository to mine: a local path or an https:// or file:// URL (required)")
	fs.StringVar(&f.name, "name", "", "owner/repo for instance ids and GitHub lookups (default: from the origin remote, else the directory name)")
	fs.StringVar(&f.since, "since", "", "only commits authored on or after this date (YYYY-MM-DD)")
	fs.IntVar(&f.max, "max", 0, "stop after this many instances are kept, newest first (0: no cap)")
	fs.IntVar(&f.concurrency, "concurrency", 1, "candidates validated at once (each runs two sandboxes)")
	fs.StringVar(&f.out, "out", "", "instances file to write (.jsonl) (required)")
	fs.StringVar(&f.report, "report", "", "mining report to write (default: OUT with .report.json)")
	fs.BoolVar(&f.noValidate, "no-validate", false, "list candidates without running their tests (no FAIL_TO_PASS: not runnable)")
	fs.BoolVar(&f.confirm, "confirm", true, "grade each kept instance once more by name with the gold patch, dropping flaky ones")
	fs.StringVar(&f.image, "image", "", "sandbox image (default "+defaultImage+")")
	fs.DurationVar(&f.timeout, "timeout", 20*time.Minute, "limit of each validation task")
	f.github.register(fs, env)
	if _, code, ok := parseCommand(env, fs, args); !ok {
		return code
	}
	if f.repo == "" || f.out == "" {
		fmt.Fprintln(env.stderr, "wrench bench mine: --repo and --out are required")
		return exitBadInput
	}
	cfg := mine.Config{Repo: f.repo, Name: f.name, Max: f.max, Concurrency: f.concurrency, Logger: f.common.logger(env)}
	if f.since != "" {
		t, err := time.Parse("2006-01-02", f.since)
		if err != nil {
			fmt.Fprintf(env.stderr, "wrench bench mine: --since %q: want YYYY-MM-DD\n", f.since)
			return exitBadInput
		}
		cfg.Since = t
	}
	if f.github.token != "" && f.name == "" {
		fmt.Fprintln(env.stderr, "wrench bench mine: a GitHub token is set but no --name owner/repo: problem statements come from commit messages")
	}
	if f.github.token != "" && f.name != "" {
		c, err := github.NewClient(github.ClientConfig{BaseURL: f.github.apiURL, Token: f.github.token})
		if err != nil {
			fmt.Fprintf(env.stderr, "wrench bench mine: %v\n", err)
			return exitBadInput
		}
		owner, repo, _ := strings.Cut(f.name, "/")
		cfg.Issues = mine.GitHubIssues{Client: c, Owner: owner, Repo: repo}
	}
	if !f.noValidate {
		w, cleanup, err := newWorker(ctx, env, workerOptions{common: f.common, image: f.image, verify: "finish", deployment: f.common.deployment, loopback: true})
		if err != nil {
			fmt.Fprintf(env.stderr, "wrench bench mine: %v\n", err)
			return exitCodeFor(err)
		}
		defer cleanup()
		scripts, err := os.MkdirTemp("", "wrench-mine-")
		if err != nil {
			fmt.Fprintf(env.stderr, "wrench bench mine: %v\n", err)
			return exitInfra
		}
		defer os.RemoveAll(scripts)
		cfg.Validator = mine.TaskValidator{Runner: workerRunner{w}, ScriptDir: scripts, Image: f.image, Timeout: f.timeout, Confirm: f.confirm}
		cfg.Progress = func(o mine.Outcome) {
			verdict := "kept"
			if !o.Kept {
				verdict = "dropped: " + o.Reason
			}
			fmt.Fprintf(env.stderr, "%s %s (%.0fs)\n", o.InstanceID, verdict, o.Seconds)
		}
	}
	ins, rep, err := mine.Mine(ctx, cfg)
	if err != nil && len(ins) == 0 {
		fmt.Fprintf(env.stderr, "wrench bench mine: %v\n", err)
		return exitInfra
	}
	if werr := writeMined(f, ins, rep); werr != nil {
		fmt.Fprintf(env.stderr, "wrench bench mine: %v\n", werr)
		return exitInfra
	}
	printMineReport(env.stdout, f.out, rep)
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench bench mine: stopped early: %v\n", err)
		return exitInfra
	}
	return exitOK
}

func writeMined(f benchMineFlags, ins []bench.Instance, rep mine.Report) error {
	var b strings.Builder
	if err := bench.WriteJSONL(&b, ins); err != nil {
		return err
	}
	if err := os.WriteFile(f.out, []byte(b.String()), 0o644); err != nil {
		return err
	}
	report := f.report
	if report == "" {
		report = strings.TrimSuffix(f.out, filepath.Ext(f.out)) + ".report.json"
	}
	js, _ := json.MarshalIndent(rep, "", "  ")
	return os.WriteFile(report, append(js, '\n'), 0o644)
}

func printMineReport(w io.Writer, out string, rep mine.Report) {
	fmt.Fprintf(w, "%s: %d commits walked, %d candidates, %d kept, %d dropped (walk %.1fs, validation %.0fs) -> %s\n",
		rep.Repo, rep.Commits, rep.Candidates, rep.Kept, rep.Dropped, rep.WalkSeconds, rep.ValidateSeconds, out)
	for reason, n := range rep.DropReasons {
		fmt.Fprintf(w, "  dropped %3d: %s\n", n, reason)
	}
	for reason, n := range rep.Skipped {
		fmt.Fprintf(w, "  skipped %3d: %s\n", n, reason)
	}
}

// workerRunner runs validation tasks on the in-process worker.
type workerRunner struct {
	w interface {
		Run(ctx context.Context, t task.Task, attempt int, onEvent func(task.Event)) task.Report
	}
}

// Run runs t as its first delivery and returns its result.
func (r workerRunner) Run(ctx context.Context, t task.Task) task.Result {
	return r.w.Run(ctx, t, 1, nil).Result
}

// benchRunFlags are the flags of `wrench bench run`.
type benchRunFlags struct {
	common      commonFlags
	instances   string
	out, name   string
	model       string
	concurrency int
	server      string
	token       string
	resume      bool
	jsonOut     bool
	ids         string
	image       string
	testCmd     string
	maxTurns    int
	maxCost     float64
	timeout     time.Duration
}

func cmdBenchRun(ctx context.Context, env *cliEnv, args []string) int {
	var f benchRunFlags
	fs := flag.NewFlagSet("wrench bench run", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	f.common.register(fs, env)
	fs.StringVar(&f.instances, "instances", "", "instances file, .json or .jsonl, ours or SWE-bench's (required)")
	fs.StringVar(&f.out, "out", "", "run directory: results, predictions, report (required)")
	fs.StringVar(&f.name, "name", "", "run name in task ids, metrics and the report (default: the --out directory's name)")
	fs.StringVar(&f.model, "model", "", "model name, scripted:FILE, or an oracle: gold, empty, wrong (required)")
	fs.IntVar(&f.concurrency, "concurrency", 1, "instances in flight at once (and the in-process server's slots)")
	fs.StringVar(&f.server, "server", "", "run through this Wrench server's API (default: a server started in this process on OUT/server)")
	fs.StringVar(&f.token, "token", env.getenv("WRENCH_API_TOKEN"), "bearer token of --server (default $WRENCH_API_TOKEN)")
	fs.BoolVar(&f.resume, "resume", false, "continue the run in --out; instances with a result are not run again")
	fs.BoolVar(&f.jsonOut, "json", false, "print the report as JSON instead of Markdown")
	fs.StringVar(&f.ids, "ids", "", "run only these instance ids (comma-separated)")
	fs.StringVar(&f.image, "image", "", "sandbox image of every task")
	fs.StringVar(&f.testCmd, "test-command", "", "test command of every task, run before and after the agent (default: the instance's own, if any)")
	fs.IntVar(&f.maxTurns, "max-turns", 0, "model turns per instance at most")
	fs.Float64Var(&f.maxCost, "max-cost", 0, "model spend per instance at most, in USD")
	fs.DurationVar(&f.timeout, "timeout", 0, "wall-clock limit per instance")
	if _, code, ok := parseCommand(env, fs, args); !ok {
		return code
	}
	if f.instances == "" || f.out == "" || f.model == "" {
		fmt.Fprintln(env.stderr, "wrench bench run: --instances, --out and --model are required")
		return exitBadInput
	}
	ins, err := bench.ReadInstances(f.instances)
	if err == nil {
		ins, err = selectInstances(ins, f.ids)
	}
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench bench run: %v\n", err)
		return exitBadInput
	}
	queue, stop, err := benchQueue(ctx, env, f)
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench bench run: %v\n", err)
		return exitCodeFor(err)
	}
	defer stop()
	done := 0
	cfg := bench.RunConfig{Dir: f.out, Name: f.name, Model: f.model, Instances: ins, Concurrency: f.concurrency, Resume: f.resume,
		Queue: queue, Image: f.image, TestCommand: f.testCmd,
		Limits: task.Limits{MaxTurns: f.maxTurns, MaxCostUSD: f.maxCost, Timeout: task.Duration(f.timeout)},
		Progress: func(r bench.Result) {
			done++
			verdict := "resolved"
			if !r.Resolved {
				verdict = "unresolved (" + r.Failure + ")"
			}
			fmt.Fprintf(env.stderr, "[%d] %s: %s, %.1fs\n", done, r.InstanceID, verdict, r.Seconds)
		}}
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench bench run: %v\n", err)
		if errors.Is(err, bench.ErrRunExists) {
			return exitBadInput
		}
		return exitInfra
	}
	if f.jsonOut {
		_ = printJSON(env.stdout, rep)
	} else {
		_ = rep.WriteMarkdown(env.stdout)
	}
	return exitOK
}

// selectInstances keeps the instances named in ids (all when empty).
func selectInstances(ins []bench.Instance, ids string) ([]bench.Instance, error) {
	if ids == "" {
		return ins, nil
	}
	want := map[string]bool{}
	for _, id := range strings.Split(ids, ",") {
		want[strings.TrimSpace(id)] = true
	}
	var out []bench.Instance
	for _, in := range ins {
		if want[in.InstanceID] {
			out = append(out, in)
			delete(want, in.InstanceID)
		}
	}
	for id := range want {
		return nil, fmt.Errorf("--ids: no instance %q", id)
	}
	return out, nil
}

func cmdBenchCompare(env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("wrench bench compare", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	jsonOut := fs.Bool("json", false, "print the comparison as JSON")
	pos, code, ok := parseCommand(env, fs, args)
	if !ok {
		return code
	}
	if len(pos) != 2 {
		fmt.Fprintln(env.stderr, "usage: wrench bench compare [--json] A B  (run directories or results.jsonl files)")
		return exitBadInput
	}
	var runs [2][]bench.Result
	for i, p := range pos {
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			p = filepath.Join(p, "results.jsonl")
		}
		var err error
		if runs[i], err = bench.ReadResults(p); err != nil {
			fmt.Fprintf(env.stderr, "wrench bench compare: %v\n", err)
			return exitBadInput
		}
	}
	c := bench.Compare(pos[0], runs[0], pos[1], runs[1])
	if *jsonOut {
		_ = printJSON(env.stdout, c)
	} else {
		_ = c.WriteText(env.stdout)
	}
	return exitOK
}
