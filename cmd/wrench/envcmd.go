package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wrenchworks/wrench/environment"
	"github.com/wrenchworks/wrench/sandbox/docker"
	"github.com/wrenchworks/wrench/task"
)

// cmdEnv manages environment snapshots: `wrench env ls`, `wrench env build
// --repo R`, `wrench env prune [--older-than D] [--max-size S]`.
func cmdEnv(ctx context.Context, env *cliEnv, args []string) int {
	usage := "usage: wrench env ls [--json] | build --repo URL|PATH [--ref R] [--commit C] | prune [--older-than DURATION] [--max-size SIZE]"
	if len(args) == 0 {
		fmt.Fprintln(env.stderr, usage)
		return exitBadInput
	}
	switch args[0] {
	case "ls":
		return envList(ctx, env, args[1:])
	case "build":
		return envBuild(ctx, env, args[1:])
	case "prune":
		return envPrune(ctx, env, args[1:])
	case "-h", "--help", "help":
		fmt.Fprintln(env.stdout, usage)
		return exitOK
	}
	fmt.Fprintf(env.stderr, "wrench env: unknown subcommand %q\n%s\n", args[0], usage)
	return exitBadInput
}

// openStore connects to the engine and opens the data dir's snapshot store.
func openStore(ctx context.Context, env *cliEnv, common commonFlags) (*environment.Store, func(), error) {
	dataDir, err := common.resolvedDataDir()
	if err != nil {
		return nil, nil, err
	}
	prov, err := docker.New(ctx, docker.Config{Deployment: common.deployment, Logger: common.logger(env)})
	if err != nil {
		return nil, nil, err
	}
	store, err := environment.NewStore(prov, filepath.Join(dataDir, "environments"), common.deployment)
	if err != nil {
		prov.Close()
		return nil, nil, err
	}
	return store, func() { prov.Close() }, nil
}

func envList(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("wrench env ls", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var common commonFlags
	common.register(fs, env)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, code, ok := parseCommand(env, fs, args); !ok {
		return code
	}
	store, done, err := openStore(ctx, env, common)
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench env ls: %v\n", err)
		return exitInfra
	}
	defer done()
	list, err := store.List(ctx)
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench env ls: %v\n", err)
		return exitInfra
	}
	if *asJSON {
		if err := printJSON(env.stdout, list); err != nil {
			return exitInfra
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(env.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tREPOSITORY\tCOMMIT\tSIZE\tLAST USED\tUSES")
	for i := len(list) - 1; i >= 0; i-- { // most recently used first
		sn := list[i]
		fmt.Fprintf(tw, "%s\t%s\t%.12s\t%s\t%s\t%d\n", sn.Key[:16], sn.Repo, sn.Commit, formatSize(sn.OwnSize), sn.LastUsed.Format(time.DateTime), sn.Uses)
	}
	tw.Flush()
	return exitOK
}

func envBuild(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("wrench env build", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var common commonFlags
	common.register(fs, env)
	repo := fs.String("repo", "", "repository: a local path, file:// or https:// URL (required)")
	ref := fs.String("ref", "", "branch or tag (default: the remote's HEAD)")
	commit := fs.String("commit", "", "exact commit")
	asJSON := fs.Bool("json", false, "print the setup outcome as JSON")
	if _, code, ok := parseCommand(env, fs, args); !ok {
		return code
	}
	if *repo == "" {
		fmt.Fprintln(env.stderr, "wrench env build: --repo is required")
		return exitBadInput
	}
	w, cleanup, err := newWorker(ctx, env, workerOptions{common: common, deployment: common.deployment, loopback: true})
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench env build: %v\n", err)
		return exitCodeFor(err)
	}
	defer cleanup()
	t := task.Task{Repo: task.Repo{URL: *repo, Ref: *ref, Commit: *commit}, Instruction: "build the environment", Source: task.Source{Kind: "cli"}}
	run, err := w.Prebuild(ctx, t, func(ev task.Event) {
		if ev.Kind == task.EventSetup && !*asJSON {
			fmt.Fprintln(env.stderr, strings.TrimRight(ev.Text, "\n"))
		}
	})
	if *asJSON && run != nil {
		_ = printJSON(env.stdout, run)
	}
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench env build: %v\n", err)
		return exitCodeFor(err)
	}
	if !*asJSON {
		fmt.Fprintf(env.stdout, "%s %s (%s)\n", run.Snapshot, run.Key[:16], run.Image)
	}
	return exitOK
}

func envPrune(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("wrench env prune", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var common commonFlags
	common.register(fs, env)
	older := fs.Duration("older-than", 0, "remove snapshots not used for this long (e.g. 168h)")
	maxSize := fs.String("max-size", "", "then remove the least recently used until the rest fit, e.g. 20GiB")
	if _, code, ok := parseCommand(env, fs, args); !ok {
		return code
	}
	budget, err := parseSize(*maxSize)
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench env prune: --max-size: %v\n", err)
		return exitBadInput
	}
	if *older == 0 && budget == 0 {
		fmt.Fprintln(env.stderr, "wrench env prune: give --older-than, --max-size or both")
		return exitBadInput
	}
	store, done, err := openStore(ctx, env, common)
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench env prune: %v\n", err)
		return exitInfra
	}
	defer done()
	removed, err := store.Prune(ctx, environment.PruneOptions{MaxBytes: budget, OlderThan: *older})
	for _, sn := range removed {
		fmt.Fprintf(env.stdout, "removed %s %s (%s, last used %s)\n", sn.Key[:16], sn.Repo, formatSize(sn.OwnSize), sn.LastUsed.Format(time.DateTime))
	}
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench env prune: %v\n", err)
		return exitInfra
	}
	return exitOK
}

// parseSize reads "20GiB", "500MB", "1.5G" or a number of bytes; "" is 0.
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	units := []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1}}
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(strings.ToUpper(s), strings.ToUpper(u.suffix)) {
			s, mult = strings.TrimSpace(s[:len(s)-len(u.suffix)]), u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size such as 20GiB", s)
	}
	return int64(n * mult), nil
}

// formatSize writes bytes in binary units.
func formatSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}
