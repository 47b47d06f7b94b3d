package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

// errTaskTimeout is the cause set on a task's context when its wall-clock
// limit passes, so the result says timed_out rather than cancelled.
var errTaskTimeout = errors.New("task timed out")

// Run carries out one task and always returns a Report: every failure is a
// Result with a status and a reason, and the container and workspace are
// gone when it returns. Cancelling ctx cancels the task.
func (w *Worker) Run(ctx context.Context, t task.Task, attempt int, onEvent func(task.Event)) task.Report {
	r := &taskRun{w: w, t: t, attempt: attempt, onEvent: onEvent, start: time.Now()}
	r.log = w.log.With("task_id", t.ID, "attempt", attempt)
	return r.run(ctx)
}

// taskRun is the state of one Run.
type taskRun struct {
	w       *Worker
	t       task.Task
	attempt int
	onEvent func(task.Event)
	start   time.Time
	log     *slog.Logger

	mu     sync.Mutex
	seq    uint64
	logBuf bytes.Buffer

	timings    task.Timings
	trajectory bytes.Buffer
}

func (r *taskRun) emit(ev task.Event) {
	r.mu.Lock()
	r.seq++
	ev.Seq = r.seq
	ev.TaskID = r.t.ID
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	ev.Elapsed = task.Duration(ev.Time.Sub(r.start))
	fmt.Fprintf(&r.logBuf, "%s %-11s %s%s%s\n", ev.Time.UTC().Format("15:04:05.000"), ev.Kind, ev.Phase, ev.Tool, oneLine(ev.Text, 200))
	r.mu.Unlock()
	if r.onEvent != nil {
		r.onEvent(ev)
	}
}

// phase times fn and reports its start and end.
func (r *taskRun) phase(name string, into *time.Duration, fn func() error) error {
	r.emit(task.Event{Kind: task.EventPhase, Phase: name, Text: " start"})
	t0 := time.Now()
	err := fn()
	*into = time.Since(t0)
	ev := task.Event{Kind: task.EventPhase, Phase: name, Text: " end"}
	if err != nil {
		ev.IsError, ev.Text = true, " failed: "+err.Error()
	}
	r.emit(ev)
	return err
}

func (r *taskRun) run(parent context.Context) task.Report {
	t := &r.t
	if t.ID == "" {
		t.ID = task.NewID()
	}
	if err := t.Validate(); err != nil {
		return r.finish(nil, task.Result{Status: task.StateRejected, Reason: err.Error()}, false)
	}
	r.emit(task.Event{Kind: task.EventState, State: task.StateRunning})

	limits := r.limits()
	ctx, cancel := context.WithTimeoutCause(parent, time.Duration(limits.Timeout), errTaskTimeout)
	defer cancel()

	var res task.Result
	ws, sb, err := r.prepare(ctx, limits)
	if err != nil {
		return r.finish(nil, r.failure(ctx, err), retryable(err) && ctx.Err() == nil)
	}
	defer func() {
		if err := ws.Close(); err != nil {
			r.log.Warn("remove workspace", "dir", ws.Dir(), "err", err)
		}
	}()
	defer func() {
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(parent), cleanupTimeout)
		defer ccancel()
		if err := sb.Close(cctx); err != nil {
			r.log.Warn("remove sandbox", "id", sb.ID(), "err", err)
		}
	}()
	res.BaseCommit = ws.BaseCommit()
	env := sandboxEnv{sb: sb}

	if t.TestCommand != "" {
		_ = r.phase("baseline", &r.timings.Baseline, func() error {
			res.TestsBefore = r.runTests(ctx, env)
			return nil
		})
	}

	model, modelName, closeModel, err := r.w.cfg.Models(ctx, r.modelSpec())
	if err != nil {
		f := r.failure(ctx, fmt.Errorf("open model: %w", err))
		f.BaseCommit, f.TestsBefore = res.BaseCommit, res.TestsBefore
		return r.finish(ws, f, false)
	}
	defer func() {
		if closeModel != nil {
			_ = closeModel()
		}
	}()

	var out *agent.Outcome
	_ = r.phase("agent", &r.timings.Agent, func() (err error) {
		out, err = r.w.cfg.Agent.Run(ctx, &agent.Run{
			Task:         *t,
			ModelName:    modelName,
			Model:        model,
			Env:          env,
			Workspace:    ws,
			Baseline:     res.TestsBefore,
			Limits:       agentLimits(limits),
			Verify:       r.w.cfg.Verify,
			Mode:         agent.Mode(t.Mode),
			AllowedTools: t.AllowedTools,
			PlanFirst:    t.PlanFirst,
			Approval:     r.w.cfg.Approval,
			Approve:      r.w.cfg.Approve,
			Protocol:     t.Protocol,
			OnEvent:      r.emit,
			Trajectory:   &r.trajectory,
			Secrets:      r.w.cfg.Secrets,
		})
		return err
	})
	if out == nil {
		out = &agent.Outcome{Reason: agent.StopEnvError, Err: errors.New("agent returned no outcome")}
	}
	res.Usage, res.Summary = out.Usage, out.Summary

	// Final verification runs even when the run ended on a limit: the
	// partial work may already pass.
	if ctx.Err() == nil && t.TestCommand != "" {
		r.emit(task.Event{Kind: task.EventState, State: task.StateVerifying})
		_ = r.phase("verify", &r.timings.Verify, func() error {
			res.TestsAfter = r.runTests(ctx, env)
			return nil
		})
	}
	res.Status, res.Reason = r.judge(ctx, out, res.TestsAfter)
	return r.finish(ws, res, out.Reason == agent.StopEnvError && ctx.Err() == nil && res.Status == task.StateFailed)
}

// cleanupTimeout bounds removing a sandbox once the task is over.
const cleanupTimeout = 30 * time.Second

// prepare clones the repository and starts the sandbox on it — or, with a
// warm pool, takes a ready sandbox and clones into its directory. On error
// it says which step failed and leaves nothing behind.
func (r *taskRun) prepare(ctx context.Context, limits task.Limits) (Workspace, sandbox.Sandbox, error) {
	if r.w.cfg.Pool != nil {
		return r.acquireAndClone(ctx, r.w.cfg.Pool, limits)
	}
	var ws Workspace
	err := r.phase("clone", &r.timings.Clone, func() (err error) {
		ws, err = r.w.cfg.Workspaces.Open(ctx, r.t.ID, r.t.Repo)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("clone: %w", err)
	}
	var sb sandbox.Sandbox
	err = r.phase("sandbox", &r.timings.SandboxStart, func() (err error) {
		sb, err = r.w.cfg.Sandboxes.Start(ctx, r.sandboxSpec(ws.Dir(), limits))
		return err
	})
	if err != nil {
		if cerr := ws.Close(); cerr != nil {
			r.log.Warn("remove workspace", "dir", ws.Dir(), "err", cerr)
		}
		return nil, nil, fmt.Errorf("start sandbox: %w", err)
	}
	return ws, sb, nil
}

// judge decides the final state from the agent's outcome and the last test run.
func (r *taskRun) judge(ctx context.Context, out *agent.Outcome, after *task.TestRun) (task.State, string) {
	if ctx.Err() != nil {
		if errors.Is(context.Cause(ctx), errTaskTimeout) {
			return task.StateTimedOut, "timeout: the task ran past its time limit"
		}
		return task.StateCancelled, "cancelled"
	}
	reason := string(out.Reason)
	if out.Err != nil {
		reason += ": " + out.Err.Error()
	}
	switch {
	case out.Reason == agent.StopModelError || out.Reason == agent.StopEnvError:
		return task.StateFailed, reason
	case after != nil && after.Passed:
		return task.StateResolved, reason
	case after != nil:
		return task.StateUnresolved, reason + "; tests fail after the agent's changes"
	case out.Reason == agent.StopFinished:
		return task.StateResolved, reason
	}
	return task.StateUnresolved, reason
}

// failure turns an error of a phase (wrapped with the phase's name) into
// a Result.
func (r *taskRun) failure(ctx context.Context, err error) task.Result {
	status := task.StateFailed
	switch {
	case ctx.Err() != nil && errors.Is(context.Cause(ctx), errTaskTimeout):
		status = task.StateTimedOut
	case ctx.Err() != nil:
		status = task.StateCancelled
	case badInput(err):
		status = task.StateRejected
	}
	return task.Result{Status: status, Reason: err.Error()}
}

// finish fills the common fields, takes the diff from the workspace (the
// work so far, whatever the status) and packs the artifacts.
func (r *taskRun) finish(ws Workspace, res task.Result, retry bool) task.Report {
	res.TaskID = r.t.ID
	res.Attempt = r.attempt
	res.Worker = r.w.cfg.ID
	if ws != nil {
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		patch, err := ws.Diff(dctx)
		cancel()
		if err != nil {
			res.Reason = strings.TrimPrefix(res.Reason+"; diff: "+err.Error(), "; ")
		}
		res.Patch = patch
	}
	r.timings.Total = time.Since(r.start)
	res.Timings = r.timings
	res.FinishedAt = time.Now().UTC()
	arts := map[string][]byte{}
	if res.Patch != "" {
		arts["patch.diff"] = []byte(res.Patch)
	}
	if r.trajectory.Len() > 0 {
		arts["trajectory.jsonl"] = bytes.Clone(r.trajectory.Bytes())
	}
	for name := range arts {
		res.Artifacts = append(res.Artifacts, name)
	}
	res.Artifacts = append(res.Artifacts, "log.txt")
	r.emit(task.Event{Kind: task.EventResult, State: res.Status, Result: &res, Text: res.Reason})
	r.mu.Lock()
	arts["log.txt"] = bytes.Clone(r.logBuf.Bytes())
	r.mu.Unlock()
	r.log.Info("task finished", "status", res.Status, "reason", res.Reason, "turns", res.Usage.Turns, "elapsed", res.Timings.Total)
	return task.Report{Result: res, Artifacts: arts, Retry: retry}
}

func oneLine(s string, n int) string {
	if s == "" {
		return ""
	}
	s = strings.ReplaceAll(s, "\n", "⏎")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return " " + s
}
