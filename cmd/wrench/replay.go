package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/wrenchworks/wrench/agent"
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
	commit := fs.String("commit", "", "exact commit (the result's base_commit)")
	image := fs.String("image", "", "sandbox image (default "+defaultImage+")")
	jsonOut := fs.Bool("json", false, "print the report as JSON")
	var common commonFlags
	common.register(fs, env)
	// The trajectory file may come before or after the flags.
	var file string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		file, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return exitBadInput
	}
	if file == "" && fs.NArg() == 1 {
		file = fs.Arg(0)
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
	w, cleanup, err := newWorker(ctx, env, workerOptions{common: common, image: *image, deployment: common.deployment})
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench replay: %v\n", err)
		return exitCodeFor(err)
	}
	defer cleanup()
	t := task.Task{Repo: task.Repo{URL: url, Ref: *ref, Commit: *commit}, Instruction: "replay " + file}
	var rep agent.ReplayReport
	err = w.WithEnv(ctx, t, func(ctx context.Context, e agent.Env) (err error) {
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
