package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

// cmdReplay re-executes a trajectory's tool calls in a fresh sandbox on the
// same repository and reports where the observations diverge: `wrench
// replay FILE --repo PATH|URL [--ref REF] [--commit SHA]`. It exits 0 when
// every observation matched and 1 at the first divergence.
func cmdReplay(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("wrench replay", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	repo := fs.String("repo", "", "the repository the trajectory ran on (required)")
	ref := fs.String("ref", "", "branch or tag")
	commit := fs.String("commit", "", "exact commit (default: the base commit the trajectory records, else the ref's head)")
	image := fs.String("image", "", "sandbox image (default "+defaultImage+")")
	jsonOut := fs.Bool("json", false, "print the report as JSON")
	var common commonFlags
	common.register(fs, env)
	// The trajectory file may come before or after the flags.
	pos, code, ok := parseCommand(env, fs, args)
	if !ok {
		return code
	}
	var file string
	if len(pos) == 1 {
		file = pos[0]
	}
	if file == "" || *repo == "" {
		fmt.Fprintln(env.stderr, "usage: wrench replay TRAJECTORY.jsonl --repo PATH|URL [--ref REF] [--commit SHA]")
		return exitBadInput
	}
	f, err := os.Open(file)
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench replay: %v\n", err)
		return exitBadInput
	}
	records, err := agent.ReadTrajectory(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench replay: read %s: %v\n", file, err)
		return exitBadInput
	}
	url, err := normalizeRepo(*repo)
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench replay: %v\n", err)
		return exitBadInput
	}
	w, cleanup, err := newWorker(ctx, env, workerOptions{common: common, image: *image, deployment: common.deployment, loopback: true})
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench replay: %v\n", err)
		return exitCodeFor(err)
	}
	defer cleanup()
	base := *commit
	if base == "" {
		// The trajectory's own base commit: the tree the run saw, however
		// far the repository has moved since.
		base = baseCommitOf(records)
		if base != "" {
			fmt.Fprintf(env.stderr, "wrench replay: on the run's base commit %s (--commit to choose another)\n", base)
		}
	}
	t := task.Task{Repo: task.Repo{URL: url, Ref: *ref, Commit: base}, Instruction: "replay " + file}
	var rep agent.ReplayReport
	err = w.WithEnv(ctx, t, func(ctx context.Context, e sandbox.Env) (err error) {
		rep, err = agent.Replay(ctx, e, records)
		return err
	})
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench replay: %v\n", err)
		return exitInfra
	}
	if *jsonOut {
		_ = printJSON(env.stdout, rep)
	} else {
		fmt.Fprintf(env.stdout, "replayed %d tool calls: %d matched, %d skipped, %d diverged\n",
			rep.Calls, rep.Matched, rep.Skipped, len(rep.Divergences))
		if d := rep.First(); d != nil {
			fmt.Fprintf(env.stdout, "first divergence at turn %d, %s %s\n--- recorded\n%s\n--- replayed\n%s\n",
				d.Turn, d.Tool, clip(d.Arguments, 200), clip(d.Recorded, 2000), clip(d.Replayed, 2000))
		}
	}
	if len(rep.Divergences) > 0 {
		return exitUnresolved
	}
	return exitOK
}

// baseCommitOf returns the base commit a trajectory's run started from (its
// first run_start record), or "" for a trajectory that does not say.
func baseCommitOf(records []agent.Record) string {
	for _, r := range records {
		if r.Kind == agent.RecordRunStart {
			return r.BaseCommit
		}
	}
	return ""
}
