package worker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/bluekeyes/go-gitdiff/gitdiff"

	"github.com/wrenchworks/wrench/bench/testout"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

// Grading is the worker's side of a task's hidden grading spec
// (task.Grading). It runs after the agent has finished and its patch has
// been taken, so nothing of the spec is in the sandbox, the agent's
// context, its trajectory or the events while the agent works. It needs
// one thing of the sandbox: to exec a command (with stdin).

// execer runs a command in the sandbox; sandbox.Sandbox implements it.
type execer interface {
	Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error)
}

// maxGradeOutput bounds the test output grading reads: per-test outcomes
// of large suites in `go test -json` run to megabytes.
const maxGradeOutput = 16 << 20

// gradeOutputTail is how much of the test output the Grade keeps.
const gradeOutputTail = 4 << 10

// grade applies g's test patch over the agent's work and runs its tests.
// Every failure to judge is recorded in the Grade's Error, never returned:
// the work itself is graded or it is not.
func grade(ctx context.Context, sb execer, g *task.Grading, timeout time.Duration) *task.Grade {
	gr := &task.Grade{Run: g.Run, Instance: g.Instance, Model: g.Model}
	start := time.Now()
	defer func() { gr.Duration = time.Since(start) }()

	if err := applyTestPatch(ctx, sb, g.TestPatch); err != nil {
		gr.Error = err.Error()
		return gr
	}
	var names []string
	if !g.Discover {
		names = append(append(names, g.FailToPass...), g.PassToPass...)
	}
	cmd, err := testout.Command(g.Tests.Framework, g.Tests.Files, names)
	if err != nil {
		gr.Error = err.Error()
		return gr
	}
	format, _ := testout.FormatOf(g.Tests.Framework)
	if g.Tests.Timeout > 0 {
		timeout = time.Duration(g.Tests.Timeout)
	}
	gr.Command = cmd
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: cmd, Timeout: timeout, MaxOutput: maxGradeOutput})
	if err != nil {
		gr.Error = "run the tests: " + err.Error()
		return gr
	}
	gr.ExitCode = res.ExitCode
	gr.Output = tailString(res.Output, gradeOutputTail)
	if res.TimedOut {
		gr.Output += "\n[tests timed out after " + timeout.String() + "]"
	}
	outs, err := testout.Parse(format, res.Output)
	if err != nil {
		gr.Error = err.Error()
		return gr
	}
	if g.Discover {
		gr.Tests = outs.List()
		return gr
	}
	gr.FailToPass = outs.Lookup(g.FailToPass)
	gr.PassToPass = outs.Lookup(g.PassToPass)
	fp, ft := task.Counts(gr.FailToPass)
	pp, pt := task.Counts(gr.PassToPass)
	gr.Resolved = ft > 0 && fp == ft && pp == pt
	return gr
}

// applyTestScript restores the files the test patch touches to the base
// commit (the agent may have changed or created them) and applies the
// patch read from stdin. The paths follow as arguments.
const applyTestScript = `set -e
for f in "$@"; do
  if git cat-file -e "HEAD:$f" 2>/dev/null; then git checkout -q HEAD -- "$f"; else rm -rf -- "$f"; fi
done
git apply --whitespace=nowarn -`

// applyTestPatch puts the test patch in place in the sandbox's tree.
func applyTestPatch(ctx context.Context, sb execer, patch string) error {
	if strings.TrimSpace(patch) == "" {
		return nil
	}
	paths, err := patchPaths(patch)
	if err != nil {
		return fmt.Errorf("test patch: %w", err)
	}
	cmd := "bash -c " + shellQuote(applyTestScript) + " apply"
	for _, p := range paths {
		cmd += " " + shellQuote(p)
	}
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: cmd, Stdin: []byte(patch), Timeout: 2 * time.Minute})
	switch {
	case err != nil:
		return fmt.Errorf("apply the test patch: %w", err)
	case res.ExitCode != 0:
		return fmt.Errorf("the test patch does not apply (exit %d): %s", res.ExitCode, tailString(res.Output, 2<<10))
	}
	return nil
}

// patchPaths lists every path a patch touches (old and new names), sorted.
func patchPaths(patch string) ([]string, error) {
	files, _, err := gitdiff.Parse(strings.NewReader(patch))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, errors.New("no file in the patch")
	}
	set := map[string]bool{}
	for _, f := range files {
		for _, n := range []string{f.OldName, f.NewName} {
			if n != "" {
				set[n] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func tailString(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.ToValidUTF8(string(b), "")
}
