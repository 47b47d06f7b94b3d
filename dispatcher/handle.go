package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// Timeouts of the bookkeeping around a run. Writes after a run retry until
// finishTimeout, so a NATS restart while a result is being stored loses
// nothing.
const (
	opTimeout     = 10 * time.Second
	finishTimeout = 2 * time.Minute
)

// flight is one delivery being handled.
type flight struct {
	d         *Dispatcher
	msg       jetstream.Msg
	t         task.Task
	attempt   int
	streamSeq uint64
	queueWait time.Duration
	cancel    context.CancelCauseFunc
	lease     atomic.Pointer[queue.Lease]
	events    atomic.Pointer[eventPump]
}

func (d *Dispatcher) track(f *flight) {
	d.mu.Lock()
	d.running[f] = struct{}{}
	d.mu.Unlock()
}

func (d *Dispatcher) untrack(f *flight) {
	d.mu.Lock()
	delete(d.running, f)
	d.mu.Unlock()
}

// handle takes one delivery from decoding to its acknowledgement; s is the
// run slot it was fetched with.
func (d *Dispatcher) handle(runBase context.Context, msg jetstream.Msg, s *runSlot) {
	md, err := msg.Metadata()
	if err != nil {
		d.log.Error("drop message without metadata", "subject", msg.Subject(), "err", err)
		_ = msg.Term()
		return
	}
	attempt := int(md.NumDelivered)
	id := queue.TaskIDFromSubject(msg.Subject())
	t, err := decodeTask(msg.Data(), id)
	if err != nil {
		d.reject(runBase, msg, id, attempt, t, err)
		return
	}
	ctx, cancel := context.WithCancelCause(d.conn.ExtractTrace(runBase, msg.Headers()))
	defer cancel(nil)
	f := &flight{
		d: d, msg: msg, t: t, attempt: attempt, cancel: cancel,
		streamSeq: md.Sequence.Stream, queueWait: time.Since(md.Timestamp),
	}
	d.track(f)
	defer d.untrack(f)
	hb := f.startHeartbeat()
	defer hb.stop()

	release, holdErr := d.holdRepo(ctx, t, s)
	defer release()
	if holdErr != nil && errors.Is(context.Cause(ctx), errShutdown) {
		d.log.Info("hand back held task", "task_id", t.ID)
		f.handBack(ctx, "worker shutdown: handed back")
		d.obs.TaskRequeued(ctx, t.ID, attempt, "shutdown")
		return
	}

	opCtx, opCancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	lease, _, err := d.conn.Acquire(opCtx, t, attempt, d.cfg.WorkerID)
	opCancel()
	if errors.Is(err, queue.ErrFinal) {
		d.log.Info("delivery of a final task acked without running", "task_id", t.ID, "attempt", attempt)
		f.ack(ctx)
		return
	}
	if err != nil {
		d.log.Warn("claim task", "task_id", t.ID, "err", err)
		f.nak(d.cfg.backoff(attempt))
		d.obs.TaskRequeued(ctx, t.ID, attempt, "retry: state store unavailable")
		return
	}
	f.lease.Store(lease)
	d.emit(context.WithoutCancel(ctx), task.Event{TaskID: t.ID, Kind: task.EventState, State: task.StateRunning})
	opCtx, opCancel = context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	if ok, err := d.conn.CancelRequested(opCtx, t.ID); ok {
		cancel(errCancelled)
	} else if err != nil {
		d.log.Warn("check cancel request", "task_id", t.ID, "err", err)
	}
	opCancel()

	runCtx := d.obs.TaskStarted(ctx, t, attempt, f.queueWait)
	pump := d.newEventPump(runCtx, f)
	f.events.Store(pump)
	start := time.Now()
	var rep task.Report
	if ctx.Err() == nil {
		d.log.Info("task started", "task_id", t.ID, "attempt", attempt)
		rep = d.runner.Run(runCtx, t, attempt, pump.send)
	}
	elapsed := time.Since(start)
	cause := context.Cause(ctx) // before anything else can cancel ctx
	pump.close()
	f.conclude(runCtx, rep, cause, elapsed)
}

// decodeTask parses and validates a task message. The message subject names
// the task; a body naming another id is invalid.
func decodeTask(data []byte, id string) (task.Task, error) {
	t, err := task.Decode(data)
	if err != nil {
		return task.Task{}, err
	}
	if t.ID == "" {
		t.ID = id
	}
	if err := t.Validate(); err != nil {
		return t, err
	}
	if id == "" || t.ID != id {
		return t, &task.ValidationError{Fields: []task.FieldError{{Field: "id", Problem: fmt.Sprintf("%q does not match the message subject", t.ID)}}}
	}
	return t, nil
}

// reject ends an invalid task: a rejected result (when the task can be
// named) and Term, so it is never delivered again.
func (d *Dispatcher) reject(ctx context.Context, msg jetstream.Msg, id string, attempt int, t task.Task, verr error) {
	d.log.Warn("reject invalid task", "task_id", id, "err", verr)
	if id != "" {
		var tp *task.Task
		if t.ID == id {
			tp = &t
		}
		res := task.Result{Status: task.StateRejected, Reason: verr.Error(), Attempt: attempt, Worker: d.cfg.WorkerID}
		opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
		defer cancel()
		st, written, err := d.conn.Settle(opCtx, id, tp, res)
		if err != nil {
			d.log.Warn("record rejection", "task_id", id, "err", err)
			_ = msg.NakWithDelay(d.cfg.backoff(attempt))
			return
		}
		if written {
			d.emit(opCtx, queue.ResultEvent(st))
			d.obs.TaskFinished(ctx, *st.Result, 0)
		}
	}
	if err := msg.Term(); err != nil {
		d.log.Warn("term invalid task", "task_id", id, "err", err)
	}
}

// conclude maps how the run ended to the task's final state and the
// delivery's acknowledgement.
func (f *flight) conclude(ctx context.Context, rep task.Report, cause error, elapsed time.Duration) {
	d, t := f.d, f.t
	switch {
	case errors.Is(cause, errLostLease):
		// Another worker holds the current delivery: leave it alone.
		d.log.Warn("task taken over by another worker; result discarded", "task_id", t.ID, "attempt", f.attempt)
	case cause != nil && rep.Result.Status == task.StateResolved && !rep.Retry:
		// The work was done before the cancellation or shutdown took
		// hold: keep it.
		f.finish(ctx, rep.Result, rep.Artifacts, elapsed, f.ack)
	case errors.Is(cause, errShutdown):
		d.log.Info("hand back task at shutdown", "task_id", t.ID, "attempt", f.attempt)
		f.handBack(ctx, "worker shutdown: handed back")
		d.obs.TaskRequeued(ctx, t.ID, f.attempt, "shutdown")
	case errors.Is(cause, errCancelled):
		res := rep.Result
		res.Status = task.StateCancelled
		res.Reason = "cancelled"
		f.finish(ctx, res, rep.Artifacts, elapsed, f.ack)
	case rep.Retry && f.attempt < d.cfg.MaxDeliver:
		reason := "retry: " + orUnknown(rep.Result.Reason)
		d.log.Warn("infrastructure fault; task handed back", "task_id", t.ID, "attempt", f.attempt, "reason", rep.Result.Reason)
		f.requeue(ctx, reason, d.cfg.backoff(f.attempt))
		d.obs.TaskRequeued(ctx, t.ID, f.attempt, reason)
	case rep.Retry:
		reason := fmt.Sprintf("deliveries exhausted (%d): %s", f.attempt, orUnknown(rep.Result.Reason))
		res := rep.Result
		res.Status = task.StateFailed
		res.Reason = reason
		opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
		defer cancel()
		err := retry(opCtx, func() error {
			return d.conn.DeadLetter(opCtx, t.ID, f.msg.Data(), f.msg.Headers(), f.streamSeq, f.attempt, reason)
		})
		if err != nil {
			d.log.Error("dead-letter task", "task_id", t.ID, "err", err)
		} else {
			d.obs.TaskDeadLettered(ctx, t.ID, reason)
		}
		f.finish(ctx, res, rep.Artifacts, elapsed, func(context.Context) {
			if err := f.msg.Term(); err != nil {
				d.log.Warn("term dead task", "task_id", t.ID, "err", err)
			}
		})
	default:
		res := rep.Result
		if !res.Status.Final() {
			res.Status = task.StateFailed
			res.Reason = fmt.Sprintf("runner returned no final state (%q): %s", rep.Result.Status, rep.Result.Reason)
		}
		f.finish(ctx, res, rep.Artifacts, elapsed, f.ack)
	}
}

func mergeNames(a, b []string) []string {
	seen := make(map[string]bool, len(a)+len(b))
	var out []string
	for _, n := range append(append([]string(nil), a...), b...) {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown infrastructure fault"
	}
	return s
}
