// Command chaos runs Wrench's fault suite (package internal/chaos) against
// the built binary and prints its report: a PASS or FAIL line per
// invariant, the faults injected by kind, and the figures. It exits 1 on
// any violation, 2 when the run could not be carried out.
//
//	make build image && go run ./tools/chaos -bin bin/wrench -seed 1 -tasks 500
//
// `make chaos SEED=… TASKS=…` runs it. With -markdown FILE it also writes
// the results table docs/reliability.md publishes.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/wrenchworks/wrench/internal/chaos"
)

func main() {
	var cfg chaos.Config
	var keep bool
	var markdown, machine string
	flag.StringVar(&cfg.Bin, "bin", "bin/wrench", "the wrench binary to run (make build)")
	flag.IntVar(&cfg.Tasks, "tasks", 500, "tasks to submit")
	flag.Uint64Var(&cfg.Seed, "seed", uint64(time.Now().UnixNano()%100000), "seed of the fault plan (default: drawn, and printed)")
	flag.IntVar(&cfg.FaultsPerKind, "faults", 0, "faults aimed of each kind (default max(3, tasks/40))")
	flag.IntVar(&cfg.Workers, "workers", 3, "worker processes")
	flag.IntVar(&cfg.Slots, "slots", 2, "slots per worker")
	flag.DurationVar(&cfg.AckWait, "ack-wait", 3*time.Second, "the workers' --ack-wait")
	flag.BoolVar(&cfg.Embedded, "embedded", false, "the NATS serve embeds (one node) instead of three clustered NATS server processes (R3)")
	flag.DurationVar(&cfg.Timeout, "timeout", 90*time.Minute, "bound of the whole run")
	flag.BoolVar(&keep, "keep", false, "keep the run's directory (repositories, data dirs, process logs)")
	flag.StringVar(&markdown, "markdown", "", "also write the results table to this file")
	flag.StringVar(&machine, "machine", "", "the machine, for the results table (default: cores and memory of this one)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "wrench-chaos-")
	if err != nil {
		fatal(err)
	}
	if bin, err := filepath.Abs(cfg.Bin); err == nil {
		cfg.Bin = bin
	}
	cfg.Dir, cfg.Out = dir, os.Stdout
	cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	fmt.Fprintf(os.Stderr, "chaos: seed %d, %d tasks; working in %s\n", cfg.Seed, cfg.Tasks, dir)
	rep, err := chaos.Run(ctx, cfg)
	if !keep && (err == nil && rep.Violations() == 0) {
		os.RemoveAll(dir)
	} else {
		fmt.Fprintf(os.Stderr, "chaos: logs kept in %s\n", dir)
	}
	if err != nil {
		fatal(err)
	}
	rep.Print(os.Stdout)
	if markdown != "" {
		if machine == "" {
			machine = chaos.Machine()
		}
		f, err := os.Create(markdown)
		if err != nil {
			fatal(err)
		}
		rep.Markdown(f, machine)
		if err := f.Close(); err != nil {
			fatal(err)
		}
	}
	if rep.Violations() > 0 {
		os.Exit(1)
	}
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
	os.Exit(2)
}
