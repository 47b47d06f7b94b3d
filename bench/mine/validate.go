package mine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/wrenchworks/wrench/bench"
	"github.com/wrenchworks/wrench/bench/oracle"
	"github.com/wrenchworks/wrench/task"
)

// Runner runs one task to its final result; the worker does, in the
// sandbox, on the repository's environment.
type Runner interface {
	Run(ctx context.Context, t task.Task) task.Result
}

// TaskValidator validates a candidate with ordinary tasks run by the
// worker, each with a hidden grading spec that applies the test patch
// after the agent and records every test's outcome:
//
//   - before: the empty oracle (no change), so the tests run on the base
//     commit plus the test patch;
//   - after: the gold oracle, which replays the source patch through the
//     agent's patch tool first.
//
// FAIL_TO_PASS are the tests that pass after and did not before,
// PASS_TO_PASS those that pass both times. With Confirm, a third task
// replays the gold patch and grades the two lists by name, as a bench run
// will: an instance whose tests do not all pass again is dropped.
type TaskValidator struct {
	Runner Runner
	// ScriptDir is where the oracle scripts are written.
	ScriptDir string
	// Image is the sandbox image ("" for the worker's default).
	Image string
	// Timeout bounds each task (0: the worker's default).
	Timeout time.Duration
	Confirm bool
}

// Validate fills in's FAIL_TO_PASS and PASS_TO_PASS, or says why the
// candidate is dropped.
func (v TaskValidator) Validate(ctx context.Context, in *bench.Instance, base BaseFiles) (string, string, error) {
	gold, err := v.script(in, oracle.Gold, base)
	if err != nil {
		return DropNoGold, err.Error(), nil
	}
	empty, err := v.script(in, oracle.Empty, base)
	if err != nil {
		return "", "", err
	}
	discover := func(model string) *task.Grading {
		return &task.Grading{Run: "mine", Instance: in.InstanceID, Model: model, TestPatch: in.TestPatch, Discover: true,
			Tests: task.TestSelection{Framework: in.Framework(), Files: in.Files()}}
	}
	var before, after task.Result
	var wg sync.WaitGroup
	wg.Go(func() { before = v.Runner.Run(ctx, v.task(in, empty, discover(oracle.Empty))) })
	wg.Go(func() { after = v.Runner.Run(ctx, v.task(in, gold, discover(oracle.Gold))) })
	wg.Wait()
	if ctx.Err() != nil {
		return "", "", ctx.Err()
	}
	for _, r := range []task.Result{before, after} {
		if reason, detail := unusable(r); reason != "" {
			return reason, detail, nil
		}
	}
	if strings.TrimSpace(after.Patch) == "" {
		return DropNoGold, oneLine(after.Reason), nil
	}
	f2p, p2p, passedAfter := lists(before.Grade.Tests, after.Grade.Tests)
	switch {
	case passedAfter == 0:
		return DropNoPass, tail(after.Grade.Output, 300), nil
	case len(f2p) == 0:
		return DropNoF2P, fmt.Sprintf("%d tests pass after, all of them before too", passedAfter), nil
	}
	in.FailToPass, in.PassToPass = f2p, p2p
	if after.Setup != nil {
		in.EnvironmentKey = after.Setup.Key
	}
	if !v.Confirm {
		return "", "", nil
	}
	g := &task.Grading{Run: "mine", Instance: in.InstanceID, Model: oracle.Gold, TestPatch: in.TestPatch,
		FailToPass: f2p, PassToPass: p2p, Tests: task.TestSelection{Framework: in.Framework(), Files: in.Files()}}
	again := v.Runner.Run(ctx, v.task(in, gold, g))
	if reason, detail := unusable(again); reason != "" {
		return reason, detail, nil
	}
	if !again.Grade.Resolved {
		return DropUnconfirmed, again.Grade.String(), nil
	}
	return "", "", nil
}

// unusable says why a validation task's result cannot be used.
func unusable(r task.Result) (string, string) {
	switch {
	case r.Status == task.StateFailed || r.Status == task.StateRejected || r.Status == task.StateCancelled:
		return DropInfra, oneLine(string(r.Status) + ": " + r.Reason)
	case r.Grade == nil:
		return DropGrading, "not graded: " + oneLine(r.Reason)
	case r.Grade.Error != "":
		return DropGrading, oneLine(r.Grade.Error)
	}
	return "", ""
}

// lists computes FAIL_TO_PASS and PASS_TO_PASS from the outcomes before
// and after, sorted, and how many tests pass after.
func lists(before, after []task.TestOutcome) (f2p, p2p []string, passedAfter int) {
	was := map[string]task.TestStatus{}
	for _, o := range before {
		was[o.Name] = o.Status
	}
	for _, o := range after {
		if o.Status != task.TestPassed {
			continue
		}
		passedAfter++
		if was[o.Name] == task.TestPassed {
			p2p = append(p2p, o.Name)
		} else {
			f2p = append(f2p, o.Name)
		}
	}
	sort.Strings(f2p)
	sort.Strings(p2p)
	return f2p, p2p, passedAfter
}

// script writes the oracle script of in and returns its path.
func (v TaskValidator) script(in *bench.Instance, name string, base BaseFiles) (string, error) {
	var br oracle.BaseReader
	if base != nil {
		br = func(p string) ([]byte, error) { return base(in.BaseCommit, p) }
	}
	data, err := oracle.Script(name, in.Patch, br)
	if err != nil {
		return "", err
	}
	p := filepath.Join(v.ScriptDir, in.InstanceID+"."+name+".yaml")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		return "", fmt.Errorf("write oracle script: %w", err)
	}
	return p, nil
}

// task is a validation task of in playing the script at path.
func (v TaskValidator) task(in *bench.Instance, script string, g *task.Grading) task.Task {
	return task.Task{
		ID:          "mine-" + task.NewID()[2:],
		Repo:        task.Repo{URL: in.CloneURL(), Commit: in.BaseCommit},
		Instruction: bench.Instruction(in.ProblemStatement),
		Model:       "scripted:" + script,
		Image:       v.Image,
		Limits:      task.Limits{MaxTurns: 20, Timeout: task.Duration(v.Timeout)},
		Source:      task.Source{Kind: "bench"},
		Grading:     g,
	}
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

func tail(s string, n int) string {
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return oneLine(s)
}
