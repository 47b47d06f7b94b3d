package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wrenchworks/wrench/policy"
	"github.com/wrenchworks/wrench/repoconfig"
	"github.com/wrenchworks/wrench/task"
)

// cmdConfig is `wrench config check [--repo PATH] [--policy FILE] [--task
// FILE]`: the configuration a task would run with, and where each value
// came from.
func cmdConfig(ctx context.Context, env *cliEnv, args []string) int {
	if code, ok := subcommand(env, "wrench config", "check", args); !ok {
		return code
	}
	fset := flag.NewFlagSet("wrench config check", flag.ContinueOnError)
	fset.SetOutput(env.stderr)
	repo := fset.String("repo", ".", "a checkout whose .wrench.yaml to read (as it is on disk)")
	pol := fset.String("policy", env.getenv("WRENCH_POLICY"), "server policy file (default $WRENCH_POLICY, else the built-in policy)")
	taskFile := fset.String("task", "", "a task's JSON, as submitted")
	remote := fset.Bool("remote", false, "apply the built-in policy of an API that listens beyond loopback")
	asJSON := fset.Bool("json", false, "print JSON")
	if _, code, ok := parseCommand(env, fset, args[1:]); !ok {
		return code
	}
	p, err := policy.Load(*pol, policy.Options{Loopback: !*remote})
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench config check: %v\n", err)
		return exitBadInput
	}
	t := task.Task{Repo: task.Repo{URL: *repo}, Instruction: "check"}
	if *taskFile != "" {
		data, err := os.ReadFile(*taskFile)
		if err != nil {
			fmt.Fprintf(env.stderr, "wrench config check: %v\n", err)
			return exitBadInput
		}
		if t, err = task.Decode(data); err != nil {
			fmt.Fprintf(env.stderr, "wrench config check: %s: %v\n", *taskFile, err)
			return exitBadInput
		}
	}
	if err := p.Admit(t); err != nil {
		fmt.Fprintf(env.stderr, "wrench config check: the server would refuse the task: %v\n", err)
		return exitBadInput
	}
	file, err := readLocalRepoConfig(*repo)
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench config check: %v\n", err)
		return exitBadInput
	}
	eff, err := p.Resolve(t, file)
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench config check: %v\n", err)
		return exitBadInput
	}
	if *asJSON {
		if err := printJSON(env.stdout, eff); err != nil {
			return exitInfra
		}
		return exitOK
	}
	printEffective(env, eff)
	return exitOK
}

// readLocalRepoConfig reads dir/.wrench.yaml from disk; nil when absent.
func readLocalRepoConfig(dir string) (*repoconfig.File, error) {
	f, err := os.Open(filepath.Join(dir, repoconfig.FileName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data := make([]byte, repoconfig.MaxFileBytes+1)
	n, _ := f.Read(data)
	return repoconfig.Parse(data[:n])
}

// printEffective writes one line per value: field, value, source.
func printEffective(env *cliEnv, e *policy.Effective) {
	rows := map[string]string{
		"image":               e.Image,
		"packages":            strings.Join(e.Packages, " "),
		"setup":               strings.Join(e.Setup, " && "),
		"setup_user":          e.SetupUser,
		"setup_timeout":       e.SetupTimeout.String(),
		"test":                e.Test,
		"test_timeout":        e.TestTimeout.String(),
		"env":                 joinEnv(e.Env),
		"setup_egress":        strings.Join(e.SetupEgress, " "),
		"agent_egress":        strings.Join(e.AgentEgress, " "),
		"limits.max_turns":    fmt.Sprint(e.Limits.MaxTurns),
		"limits.max_cost_usd": fmt.Sprint(e.Limits.MaxCostUSD),
		"limits.max_tokens":   fmt.Sprint(e.Limits.MaxTokens),
		"limits.timeout":      time.Duration(e.Limits.Timeout).String(),
		"sandbox.memory_mb":   fmt.Sprint(e.Sandbox.MemoryMB),
		"sandbox.cpus":        fmt.Sprint(e.Sandbox.CPUs),
		"sandbox.pids":        fmt.Sprint(e.Sandbox.Pids),
		"sandbox.disk_mb":     fmt.Sprint(e.Sandbox.DiskMB),
		"sandbox.network":     e.Sandbox.Network,
		"instructions":        strings.Join(e.Instructions, " "),
		"secrets":             strings.Join(e.SecretNames, " "),
	}
	names := make([]string, 0, len(rows))
	for k := range rows {
		names = append(names, k)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(env.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FIELD\tVALUE\tFROM")
	for _, k := range names {
		src := e.Sources[k]
		if src == "" {
			src = "not set"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", k, rows[k], src)
	}
	tw.Flush()
	for _, n := range e.Notes {
		fmt.Fprintln(env.stdout, "note:", n)
	}
}

func joinEnv(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + m[k]
	}
	return strings.Join(keys, " ")
}
