package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

// testOutputTail is how much of a test run's output a TestRun keeps.
const testOutputTail = 8000

// testResult is one verification with the failing tests it names.
type testResult struct {
	run task.TestRun
	// failing holds the test identifiers the output names as failing
	// (Go, pytest, TAP, jest); empty when none could be told apart.
	failing map[string]bool
}

// verifyState tracks verification within a run.
type verifyState struct {
	// goodID is the last good checkpoint (the base at first) and good its
	// test result (nil: unknown).
	goodID string
	good   *testResult
	// current is the result for the tree as it is; nil after a change.
	current *testResult
	// last is the latest test run reported in the Outcome.
	last *task.TestRun
	// dirty says files may have changed since the last verification.
	dirty bool
	// written lists paths the tools wrote since the last checkpoint.
	written    map[string]bool
	rejections int
	rollbacks  int
}

func (v *verifyState) touch(paths []string) {
	v.dirty = true
	v.current = nil
	if v.written == nil {
		v.written = map[string]bool{}
	}
	for _, p := range paths {
		v.written[p] = true
	}
}

func (s *runState) verifyPolicy() VerifyPolicy {
	if s.r.Verify == "" {
		return VerifyOnFinish
	}
	return s.r.Verify
}

// canVerify says whether verification runs at all: not without a test
// command, and not in plan mode (nothing was changed).
func (s *runState) canVerify() bool {
	return s.verifyPolicy() != VerifyNever && s.r.Mode != task.ModePlan && strings.TrimSpace(s.r.Task.TestCommand) != ""
}

// prepareVerification sets the first rollback target: the given base
// checkpoint, or a new one of the untouched tree.
func (s *runState) prepareVerification(ctx context.Context) *ending {
	s.ver.dirty = true
	if s.r.Baseline != nil {
		s.ver.good = newTestResult(*s.r.Baseline)
	}
	s.ver.goodID = s.r.BaseCheckpoint
	if s.r.Workspace == nil || s.ver.goodID != "" || !s.canVerify() {
		return nil
	}
	id, err := s.r.Workspace.Checkpoint(ctx, "wrench: base")
	if err != nil {
		if ctx.Err() != nil {
			return &ending{reason: StopCancelled, err: context.Cause(ctx)}
		}
		s.logEvent("base checkpoint failed, rollback disabled: %v", err)
		return nil
	}
	s.ver.goodID = id
	return nil
}

func newTestResult(run task.TestRun) *testResult {
	return &testResult{run: run, failing: FailingTests(run.Output)}
}

var failingPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`),                        // go test
	regexp.MustCompile(`(?m)^FAIL\s+(\S+)\s+\[(?:build|setup) failed\]`), // go build failure
	regexp.MustCompile(`(?m)^(?:FAILED|ERROR) (\S+::\S+|\S+\.py)`),       // pytest summary
	regexp.MustCompile(`(?m)^(\S+::\S+) (?:FAILED|ERROR)`),               // pytest -v
	regexp.MustCompile(`(?m)^not ok \d+ (?:- )?(.+)$`),                   // TAP
	regexp.MustCompile(`(?m)^\s*[✕×] (.+?)(?: \(\d+ ?m?s\))?$`),          // jest
	regexp.MustCompile(`(?m)^(?:ERROR|FAIL): (\w+) \(([\w.]+)\)`),        // unittest
	regexp.MustCompile(`(?m)^(\S+\.go):\d+:\d+: `),                       // go compile errors, by file
}

// FailingTests extracts the identifiers of failing tests from a test
// command's output (go test, pytest, unittest, TAP, jest, and compile
// errors by file). It returns an empty set when it recognises none.
func FailingTests(output string) map[string]bool {
	out := map[string]bool{}
	for _, re := range failingPatterns {
		for _, m := range re.FindAllStringSubmatch(output, -1) {
			if len(m) < 2 || m[1] == "" {
				continue
			}
			id := m[1]
			if len(m) > 2 && m[2] != "" {
				id = m[2] + "." + m[1]
			}
			out[strings.TrimSpace(id)] = true
		}
	}
	return out
}

// regression reports whether cur is worse than good: it fails where good
// passed, or it names failing tests good did not. Without identifiers on
// both sides a failing-to-failing change is not called a regression.
func regression(good, cur *testResult) (bool, []string) {
	if good == nil || cur.run.Passed {
		return false, nil
	}
	if good.run.Passed {
		return true, slices.Sorted(maps.Keys(cur.failing))
	}
	if len(good.failing) == 0 || len(cur.failing) == 0 {
		return false, nil
	}
	var newly []string
	for k := range cur.failing {
		if !good.failing[k] {
			newly = append(newly, k)
		}
	}
	slices.Sort(newly)
	return len(newly) > 0, newly
}

// verification is what one verification told the model.
type verification struct {
	note       string
	rolledBack bool
}

// verify runs the test command in the sandbox. A pass makes a checkpoint;
// a regression against the last good checkpoint is rolled back; the note
// tells the model which happened and why.
func (s *runState) verify(parent, ctx context.Context, trigger string) (verification, *ending) {
	cur, res, e := s.runTests(parent, ctx, trigger)
	if e != nil {
		return verification{}, e
	}
	if cur.run.Passed {
		return s.passed(parent, ctx, trigger)
	}
	return s.failed(ctx, trigger, cur, res)
}

// runTests runs the test command and makes its result the current one.
func (s *runState) runTests(parent, ctx context.Context, trigger string) (*testResult, sandbox.ExecResult, *ending) {
	cmd := s.r.Task.TestCommand
	s.emit(task.Event{Kind: task.EventPhase, Phase: "verify", Text: trigger})
	start := time.Now()
	res, err := s.r.Env.Exec(ctx, sandbox.ExecRequest{Command: cmd, Timeout: cmp.Or(s.r.TestTimeout, task.DefaultTestTimeout), MaxOutput: execOutputCap})
	if err != nil {
		if ctx.Err() != nil {
			return nil, res, s.stopFor(parent, ctx.Err())
		}
		return nil, res, &ending{reason: StopEnvError, err: fmt.Errorf("run tests: %w", errors.Join(ErrEnvFailed, err))}
	}
	out := string(res.Output)
	cur := newTestResult(task.TestRun{
		Command:  cmd,
		ExitCode: res.ExitCode,
		Passed:   res.ExitCode == 0 && !res.TimedOut,
		Duration: time.Since(start),
		Output:   out[max(0, len(out)-testOutputTail):],
	})
	cur.failing = FailingTests(out)
	s.traj.write(Record{Kind: RecordVerify, Turn: s.turn, Note: trigger, Test: &cur.run})
	s.ver.last = &cur.run
	s.ver.dirty = false
	s.ver.current = cur
	return cur, res, nil
}

// passed makes the passing tree the last good one (a checkpoint, when
// there is a workspace).
func (s *runState) passed(parent, ctx context.Context, trigger string) (verification, *ending) {
	cur := s.ver.current
	s.rec.success("", true)
	note := fmt.Sprintf("Verification (%s): the tests pass (`%s`).", trigger, cur.run.Command)
	if s.r.Workspace == nil {
		s.ver.good = cur
		return verification{note: note}, nil
	}
	id, err := s.r.Workspace.Checkpoint(ctx, fmt.Sprintf("wrench: verified turn %d", s.turn))
	switch {
	case err == nil:
		s.ver.goodID, s.ver.good = id, cur
		clear(s.ver.written)
		s.emit(task.Event{Kind: task.EventCheckpoint, Text: id})
		note += " Checkpoint saved."
	case ctx.Err() != nil:
		return verification{}, s.stopFor(parent, ctx.Err())
	default:
		s.logEvent("checkpoint failed: %v", err)
	}
	return verification{note: note}, nil
}

// failed tells the model about failing tests, and rolls back when they
// are a regression against the last good checkpoint.
func (s *runState) failed(ctx context.Context, trigger string, cur *testResult, res sandbox.ExecResult) (verification, *ending) {
	out := string(res.Output)
	shown := strings.TrimRight(capOutput(out, s.a.cfg.MaxOutputChars, res.Dropped), "\n")
	class := ClassifyError(out, res.ExitCode, res.TimedOut)
	recNote := s.rec.failure(class, out, "", len(s.history) > 0)
	isReg, newly := regression(s.ver.good, cur)
	if !isReg {
		note := fmt.Sprintf("Verification (%s): the test command `%s` fails (exit code %d, error class: %s).\n%s", trigger, cur.run.Command, res.ExitCode, class, shown)
		return verification{note: joinNotes(note, []string{recNote})}, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Verification (%s): REGRESSION. The test command `%s` fails (exit code %d, error class: %s)", trigger, cur.run.Command, res.ExitCode, class)
	if s.ver.good.run.Passed {
		b.WriteString(", but it passed at the last good checkpoint.")
	} else {
		fmt.Fprintf(&b, ", and tests that passed at the last good checkpoint now fail: %s.", strings.Join(newly, ", "))
	}
	if s.r.Workspace == nil || s.ver.goodID == "" {
		b.WriteString(" No checkpoint is available, so nothing was rolled back: undo the breaking change yourself.\nTest output:\n")
		b.WriteString(shown)
		return verification{note: joinNotes(b.String(), []string{recNote})}, nil
	}
	if e := s.rollBack(ctx, &b); e != nil {
		return verification{}, e
	}
	b.WriteString(". View files again before editing them, and try a different change.\nTest output before the rollback:\n")
	b.WriteString(shown)
	return verification{note: joinNotes(b.String(), []string{recNote}), rolledBack: true}, nil
}

// rollBack restores the last good checkpoint and says so in b.
func (s *runState) rollBack(ctx context.Context, b *strings.Builder) *ending {
	// Roll back even when the run is being cancelled: a half-done rollback
	// would leave a tree nobody verified.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	err := s.r.Workspace.Rollback(rctx, s.ver.goodID)
	cancel()
	if err != nil {
		return &ending{reason: StopEnvError, err: fmt.Errorf("rollback to %s: %w", s.ver.goodID, errors.Join(ErrEnvFailed, err))}
	}
	s.ver.rollbacks++
	files := slices.Sorted(maps.Keys(s.ver.written))
	clear(s.ver.written)
	s.ver.current = s.ver.good
	s.ver.last = &s.ver.good.run
	s.emit(task.Event{Kind: task.EventRollback, Text: fmt.Sprintf("rolled back to %s: %s", s.ver.goodID, strings.Join(files, ", "))})
	b.WriteString(" Your changes since then were ROLLED BACK: the workspace is again exactly as at that checkpoint")
	if len(files) > 0 {
		fmt.Fprintf(b, " (undone: edits to %s, and anything commands changed)", strings.Join(files, ", "))
	}
	return nil
}
