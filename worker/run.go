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
	"github.com/wrenchworks/wrench/environment"
	"github.com/wrenchworks/wrench/internal/logctx"
	"github.com/wrenchworks/wrench/policy"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

// errTaskTimeout is the cause set on a task's context when its wall-clock
// limit passes, so the result says timed_out rather than cancelled.
var errTaskTimeout = errors.New("task timed out")

// Run carries out one task and always returns a Report: every failure is a
// Result with a status and a reason, and the sandbox is gone when it
// returns. Cancelling ctx cancels the task.
func (w *Worker) Run(ctx context.Context, t task.Task, attempt int, onEvent func(task.Event)) task.Report {
	r := &taskRun{w: w, t: t, attempt: attempt, onEvent: onEvent, start: time.Now(), earlier: task.RedeliveryOf(ctx)}
	// Bound to the run's context: every line says the task's trace_id.
	r.log = logctx.Bind(ctx, w.log.With("task_id", t.ID, "attempt", attempt))
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
	secrets map[string]string

	mu     sync.Mutex
	seq    uint64
	logBuf bytes.Buffer

	timings    task.Timings
	trajectory bytes.Buffer
	// earlier is what the dispatcher told of the task's earlier attempts.
	earlier task.Redelivery
	// history is the file history artifact (see fileHistoryArtifact).
	history []byte
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
	ev.Text = task.RedactSecrets(ev.Text, r.allSecrets())
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
	if rep, refused := r.refuse(parent); refused {
		return rep
	}
	r.emit(task.Event{Kind: task.EventState, State: task.StateRunning})
	r.reclaim(parent)

	// Until the repository's configuration is read, the task's own limit
	// (or the policy's default) bounds it; then the effective one does.
	ctx, cancel := context.WithTimeoutCause(parent, r.initialTimeout(), errTaskTimeout)
	defer cancel()
	src, eff, err := r.configure(ctx)
	if err != nil {
		return r.finish(nil, r.failure(ctx, err), retryable(err) && ctx.Err() == nil)
	}
	ctx, cancel2 := context.WithDeadlineCause(parent, r.start.Add(time.Duration(eff.Limits.Timeout)), errTaskTimeout)
	defer cancel2()
	prep, err := r.prepare(ctx, src, eff)
	src.Close()
	if err != nil {
		return r.finish(nil, r.prepareFailure(ctx, err), retryable(err) && ctx.Err() == nil)
	}
	defer func() {
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(parent), cleanupTimeout)
		defer ccancel()
		if _, err := prep.Close(cctx); err != nil {
			r.log.Warn("remove sandbox", "id", prep.Sandbox.ID(), "err", err)
		}
	}()
	ws, _ := prep.Sandbox.(sandbox.Checkpointer)
	res := task.Result{BaseCommit: prep.Base.Commit, Setup: prep.Setup}
	env := prep.Sandbox
	r.t.TestCommand = eff.Test

	if r.t.TestCommand != "" {
		_ = r.phase("baseline", &r.timings.Baseline, func() error {
			res.TestsBefore = r.runTests(ctx, env, eff.TestTimeout)
			return nil
		})
	}
	out, rep, done := r.runAgent(ctx, prep, eff, &res)
	if done {
		return rep
	}
	return r.conclude(ctx, env, ws, eff, res, out)
}

// refuse checks what needs nothing cloned or opened: the task's input,
// the policy again (a task that reached the queue some other way than the
// API, a NATS client with a worker's credentials, still cannot read this
// disk or widen a limit) and the budgets. refused says the report is the
// task's end.
func (r *taskRun) refuse(parent context.Context) (rep task.Report, refused bool) {
	t := &r.t
	if t.ID == "" {
		t.ID = task.NewID()
	}
	if err := checkInput(t); err != nil {
		return r.finish(nil, task.Result{Status: task.StateRejected, Reason: err.Error(), Fault: task.FaultInput}, false), true
	}
	if err := r.w.cfg.Policy.Admit(*t); err != nil {
		return r.finish(nil, task.Result{Status: task.StateRejected, Reason: err.Error(), Fault: task.FaultInput}, false), true
	}
	if over := r.exhausted(parent); over != nil {
		// Nothing left today: pause before cloning anything.
		p := task.PauseFor(over, r.w.cfg.Now())
		return r.pause(nil, paused(p), p), true
	}
	return task.Report{}, false
}

// runAgent runs the agent on the prepared sandbox, from the task's save
// point when an earlier attempt left one, and fills res's usage, summary
// and resumption. done says rep is the task's end (the model could not be
// opened, the run was invalid, or a budget paused it); otherwise out is
// the agent's outcome, to be verified.
func (r *taskRun) runAgent(ctx context.Context, prep *environment.Prepared, eff *policy.Effective, res *task.Result) (out *agent.Outcome, rep task.Report, done bool) {
	env := prep.Sandbox
	ws, _ := env.(sandbox.Checkpointer)
	baseCP, spent := prep.Base.Checkpoint, r.earlier.Spent
	var resumeFrom *agent.SavePoint
	if rs := r.restore(ctx, env, ws, eff.Resume, res.BaseCommit, baseCP); rs != nil {
		resumeFrom, baseCP, spent = rs.point, rs.checkpoint, atLeast(spent, rs.point.Usage)
		res.Resumed = resumedLine(rs.point.Turn, r.earlier.Cause)
		r.emit(task.Event{Kind: task.EventResume, Turn: rs.point.Turn, Text: res.Resumed})
	}
	var onSave func(agent.SavePoint)
	if eff.Resume {
		onSave = r.saver(ctx, ws, res.BaseCommit)
	}

	model, modelName, closeModel, err := r.w.cfg.Models(ctx, r.modelSpec())
	if err != nil {
		f := r.failure(ctx, fmt.Errorf("open model: %w", err))
		f.BaseCommit, f.TestsBefore, f.Setup, f.Resumed = res.BaseCommit, res.TestsBefore, res.Setup, res.Resumed
		return nil, r.finish(ws, f, false), true
	}
	defer func() {
		if closeModel != nil {
			_ = closeModel()
		}
	}()
	t := &r.t
	agentErr := r.phase("agent", &r.timings.Agent, func() (err error) {
		out, err = r.w.cfg.Agent.Run(ctx, &agent.Run{
			Task:           t.Hidden(),
			ModelName:      modelName,
			Model:          model,
			Env:            env,
			Workspace:      ws,
			BaseCheckpoint: baseCP,
			Resume:         resumeFrom,
			Spent:          spent,
			Budget:         r.budget(),
			OnSave:         onSave,
			SaveEvery:      r.w.cfg.SaveEvery,
			Baseline:       res.TestsBefore,
			BaseCommit:     res.BaseCommit,
			Limits:         agentLimits(eff.Limits),
			Verify:         r.w.cfg.Verify,
			TestTimeout:    eff.TestTimeout,
			Mode:           t.Mode,
			AllowedTools:   t.AllowedTools,
			PlanFirst:      t.PlanFirst,
			Approval:       r.w.cfg.Approval,
			Approve:        r.w.cfg.Approve,
			OnLimit:        r.w.cfg.OnLimit,
			Protocol:       t.Protocol,
			OnEvent:        r.emit,
			Trajectory:     &r.trajectory,
			Secrets:        r.allSecrets(),
			// The repository's instruction files, when its .wrench.yaml
			// names them.
			ProjectInstructions: eff.Instructions,
		})
		return err
	})
	if out == nil && errors.Is(agentErr, agent.ErrInvalidRun) {
		return nil, r.finish(ws, rejected(agentErr, *res), false), true
	}
	if out == nil {
		out = &agent.Outcome{Reason: agent.StopEnvError, Err: errors.New("agent returned no outcome")}
	}
	res.Usage, res.Summary = out.Usage, out.Summary
	r.history = fileHistoryArtifact(out.FileHistory, r.allSecrets())
	if p := r.pauseOf(out); p != nil && ctx.Err() == nil {
		pres := paused(p)
		pres.BaseCommit, pres.TestsBefore, pres.Setup, pres.Resumed, pres.Usage = res.BaseCommit, res.TestsBefore, res.Setup, res.Resumed, res.Usage
		return nil, r.pause(ws, pres, p), true
	}
	return out, task.Report{}, false
}

// conclude verifies the agent's work and judges it: the final test run
// (even when the run ended on a limit, as the partial work may already
// pass; not for a plan-mode run, which changes nothing), the status and
// fault, and, for a graded task, the grading.
func (r *taskRun) conclude(ctx context.Context, env sandbox.Sandbox, ws sandbox.Checkpointer, eff *policy.Effective, res task.Result, out *agent.Outcome) task.Report {
	t := &r.t
	if ctx.Err() == nil && t.TestCommand != "" && t.Mode != task.ModePlan {
		r.emit(task.Event{Kind: task.EventState, State: task.StateVerifying})
		_ = r.phase("verify", &r.timings.Verify, func() error {
			res.TestsAfter = r.runTests(ctx, env, eff.TestTimeout)
			return nil
		})
	}
	res.Status, res.Reason = r.judge(ctx, out, res.TestsAfter)
	res.Fault = faultOf(res.Status, out.Reason)
	retry := out.Reason == agent.StopEnvError && ctx.Err() == nil && res.Status == task.StateFailed
	if retry && sandbox.KindOf(out.Err) == sandbox.ErrLimit {
		// The task's own work filled the disk, the memory or the
		// lifetime: another attempt would hit the same limit.
		res.Fault, retry = task.FaultModel, false
	}
	if t.Grading != nil {
		// The agent's patch is taken before the test patch touches the tree.
		if r.takeDiff(ws, &res) {
			return r.finish(nil, res, true)
		}
		r.gradePhase(ctx, env, &res, eff.TestTimeout)
		return r.finish(nil, res, retry)
	}
	return r.finish(ws, res, retry)
}

// reclaim removes what earlier attempts of the task left before this one
// makes its own. A failure is logged: the reaper's sweeps remove the rest.
func (r *taskRun) reclaim(ctx context.Context) {
	if r.attempt <= 1 || r.w.cfg.Reclaim == nil {
		return
	}
	n, err := r.w.cfg.Reclaim(ctx, r.t.ID)
	if err != nil {
		r.log.Warn("remove what earlier attempts left", "err", err)
	}
	if n > 0 {
		r.emit(task.Event{Kind: task.EventLog, Text: fmt.Sprintf("removed %d containers and workspaces of earlier attempts", n)})
	}
}

// gradePhase runs the task's hidden grading spec once the agent is done.
// A task that was cancelled or timed out is not graded.
func (r *taskRun) gradePhase(ctx context.Context, sb sandbox.Sandbox, res *task.Result, timeout time.Duration) {
	if ctx.Err() != nil {
		res.Grade = &task.Grade{Run: r.t.Grading.Run, Instance: r.t.Grading.Instance, Model: r.t.Grading.Model,
			Error: "not graded: the task was " + string(res.Status)}
		return
	}
	_ = r.phase("grade", &r.timings.Grade, func() error {
		res.Grade = grade(ctx, sb, r.t.Grading, timeout)
		return nil
	})
}

// initialTimeout bounds resolving and configuring: the task's limit, or
// the policy's default for its repository.
func (r *taskRun) initialTimeout() time.Duration {
	if d := time.Duration(r.t.Limits.Timeout); d > 0 {
		return d
	}
	if d := time.Duration(r.w.cfg.Policy.For(r.t.Repo.URL).Limits.Timeout); d > 0 {
		return d
	}
	return task.DefaultTimeout
}

// allSecrets are the values redacted from the trajectory and events: the
// worker's own and the setup secrets of this task.
func (r *taskRun) allSecrets() []string {
	out := append([]string(nil), r.w.cfg.Secrets...)
	for _, v := range r.secrets {
		out = append(out, v)
	}
	return out
}

// cleanupTimeout bounds removing a sandbox once the task is over.
const cleanupTimeout = 30 * time.Second

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
	case r.t.Mode == task.ModePlan:
		return judgePlan(out.Reason, reason)
	case after != nil && after.Passed:
		return task.StateResolved, reason
	case after != nil:
		return task.StateUnresolved, reason + "; tests fail after the agent's changes"
	case out.Reason == agent.StopFinished:
		return task.StateResolved, reason
	}
	return task.StateUnresolved, reason
}

// faultOf says whose fault an ended run is: the model service and the
// sandbox are infrastructure; a run that ended unresolved is the model's.
func faultOf(s task.State, reason agent.StopReason) task.Fault {
	switch {
	case s == task.StateFailed:
		return task.FaultInfra
	case s == task.StateUnresolved, s == task.StateTimedOut:
		return task.FaultModel
	case reason == agent.StopModelError:
		return task.FaultInfra
	}
	return task.FaultNone
}

// failure turns an error of a phase (wrapped with the phase's name) into
// a Result.
func (r *taskRun) failure(ctx context.Context, err error) task.Result {
	status, fault := task.StateFailed, task.FaultInfra
	switch {
	case ctx.Err() != nil && errors.Is(context.Cause(ctx), errTaskTimeout):
		status, fault = task.StateTimedOut, task.FaultNone
	case ctx.Err() != nil:
		status, fault = task.StateCancelled, task.FaultNone
	case badInput(err):
		status, fault = task.StateRejected, task.FaultInput
	}
	return task.Result{Status: status, Reason: err.Error(), Fault: fault}
}

// prepareFailure is failure for the environment phase: a failed setup is
// the repository's fault, reported with its outcome and never retried.
func (r *taskRun) prepareFailure(ctx context.Context, err error) task.Result {
	var se *environment.SetupError
	if errors.As(err, &se) && ctx.Err() == nil {
		return task.Result{Status: task.StateFailed, Reason: se.Error(), Fault: task.FaultSetup, Setup: se.Run}
	}
	return r.failure(ctx, err)
}

// finish fills the common fields, takes the diff from the workspace (the
// work so far, whatever the status) and packs the artifacts.
func (r *taskRun) finish(ws sandbox.Checkpointer, res task.Result, retry bool) task.Report {
	return r.report(ws, res, retry, task.Event{Kind: task.EventResult, State: res.Status, Text: res.Reason})
}

// report is finish with the event that ends the attempt: the result, or
// for a pause the paused state.
func (r *taskRun) report(ws sandbox.Checkpointer, res task.Result, retry bool, last task.Event) task.Report {
	res.TaskID = r.t.ID
	// The earlier attempts' model use counts, whether or not this one got
	// as far as the agent.
	turns := res.Usage.Turns
	res.Usage = atLeast(res.Usage, r.earlier.Spent)
	res.Usage.Turns = turns
	res.Attempt = r.attempt
	res.Worker = r.w.cfg.ID
	if ws != nil && r.takeDiff(ws, &res) {
		retry = true
	}
	r.timings.Total = time.Since(r.start)
	res.Timings = r.timings
	res.FinishedAt = time.Now().UTC()
	// Everything below leaves the process (result, events, the stored
	// state, a pull request): no secret and no credential-shaped token.
	if res.Redact(r.allSecrets()) {
		r.emit(task.Event{Kind: task.EventLog, Text: "the patch contained secrets or credential-shaped tokens; they are replaced by " + task.Redacted + " and the patch may not apply there"})
	}
	arts := map[string][]byte{}
	if res.Patch != "" {
		arts["patch.diff"] = []byte(res.Patch)
	}
	if r.trajectory.Len() > 0 {
		arts["trajectory.jsonl"] = bytes.Clone(r.trajectory.Bytes())
	}
	if len(r.history) > 0 {
		arts[FileHistoryArtifact] = r.history
	}
	for name := range arts {
		res.Artifacts = append(res.Artifacts, name)
	}
	res.Artifacts = append(res.Artifacts, "log.txt")
	if last.Kind == task.EventResult {
		last.State, last.Result, last.Text = res.Status, &res, res.Reason // takeDiff may have changed them
	}
	r.emit(last)
	r.mu.Lock()
	arts["log.txt"] = bytes.Clone(r.logBuf.Bytes())
	r.mu.Unlock()
	r.log.Info("attempt finished", "status", res.Status, "reason", res.Reason, "turns", res.Usage.Turns, "elapsed", res.Timings.Total)
	return task.Report{Result: res, Artifacts: arts, Retry: retry}
}

// pause is finish for a task that pauses: the report carries the pause.
func (r *taskRun) pause(ws sandbox.Checkpointer, res task.Result, p *task.Pause) task.Report {
	rep := r.report(ws, res, false, task.Event{Kind: task.EventState, State: task.StatePaused, Text: res.Reason})
	rep.Pause = p
	return rep
}

// takeDiff records the workspace's diff, the work so far, in res, and
// reports whether the attempt must be retried because a resolved result
// lost its patch: nothing says resolved without its patch. A patch that
// could not be taken (the workspace's disk is full, the sandbox failed)
// turns a resolved result into an infrastructure failure, so the
// dispatcher hands the task back instead of settling it (docs/reliability.md,
// "Disk full"). A patch over the size cap fails a resolved result without
// a retry (the model's work is over a limit). A patch that leaves out files
// too large to include is the task's work as the limits allow and keeps its
// status; the reason says what is missing.
func (r *taskRun) takeDiff(ws sandbox.Checkpointer, res *task.Result) (lost bool) {
	if ws == nil {
		return false
	}
	dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	patch, err := ws.Diff(dctx)
	cancel()
	res.Patch = patch
	if err == nil {
		return false
	}
	res.Reason = strings.TrimPrefix(res.Reason+"; diff: "+err.Error(), "; ")
	switch {
	case errors.Is(err, sandbox.ErrPartialPatch) || res.Status != task.StateResolved:
		return false
	case sandbox.KindOf(err) == sandbox.ErrLimit:
		res.Status, res.Fault = task.StateFailed, task.FaultModel
		res.Reason = "the patch could not be kept: " + err.Error()
		return false
	}
	res.Status, res.Fault = task.StateFailed, task.FaultInfra
	res.Reason = "the patch could not be taken: " + err.Error()
	return true
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

// judgePlan decides a plan-mode task: it changes nothing and its product is
// the plan (the result's summary), so it is resolved when the model
// finished with one, whatever the tests say.
func judgePlan(stop agent.StopReason, reason string) (task.State, string) {
	if stop == agent.StopFinished || stop == agent.StopNoToolCalls {
		return task.StateResolved, reason + "; plan mode: the plan is the summary, nothing was changed"
	}
	return task.StateUnresolved, reason + "; plan mode: no plan was finished"
}
