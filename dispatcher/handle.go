package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wrenchworks/wrench/internal/logctx"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// Timeouts of the bookkeeping around a run. Writes after a run retry until
// finishTimeout, so a NATS restart while a result is being stored loses
// nothing.
const (
	opTimeout     = 10 * time.Second
	finishTimeout = 2 * time.Minute
	// storeTimeout bounds one try at storing a result or its artifacts.
	storeTimeout = 30 * time.Second
	// resultEventTimeout bounds publishing a result event, tried again
	// through a NATS leader election; it is shorter than the event
	// stream's duplicate window (queue.DefaultDuplicateWindow), which
	// stores the tries once.
	resultEventTimeout = time.Minute
)

// flight is one delivery being handled.
type flight struct {
	d       *Dispatcher
	dl      *Delivery
	t       task.Task
	attempt int
	free    int // earlier deliveries that did not count (Delivery.Free)
	// used is the model use of the task's attempts so far, this one's
	// included, once its run returned (nil before).
	used      *task.Usage
	queueWait time.Duration
	cancel    context.CancelCauseFunc
	lease     atomic.Pointer[Lease]
	limits    atomic.Pointer[heldLimits] // places under cluster-wide limits
	events    atomic.Pointer[eventPump]
	flushMu   sync.Mutex // orders progress writes
	logger    atomic.Pointer[slog.Logger]
}

// log is the flight's logger: its lines say task_id and are handled with
// the task's context (see bindLog).
func (f *flight) log() *slog.Logger { return f.logger.Load() }

// bindLog makes the flight log with ctx's values: the delivery's trace
// context until the run starts, then the run's (its task span), so that
// every line of the task carries its trace (docs/operations.md, "Logs").
func (f *flight) bindLog(ctx context.Context) {
	f.logger.Store(logctx.Bind(ctx, f.d.log.With("task_id", f.t.ID)))
}

// charged is the task's deliveries so far that count toward its limit,
// this one included.
func (f *flight) charged() int { return f.attempt - f.free }

// leaseOf returns the flight's lease, nil before it has one.
func (f *flight) leaseOf() Lease {
	if p := f.lease.Load(); p != nil {
		return *p
	}
	return nil
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
func (d *Dispatcher) handle(runBase context.Context, dl *Delivery, s *runSlot) {
	attempt := dl.Attempt
	base := runBase
	if dl.Trace != nil {
		base = dl.Trace(base)
	}
	t, err := decodeTask(dl.Data, dl.TaskID)
	if err != nil {
		d.reject(base, dl, t, err)
		return
	}
	ctx, cancel := context.WithCancelCause(base)
	defer cancel(nil)
	f := &flight{d: d, dl: dl, t: t, attempt: attempt, free: dl.Free, cancel: cancel, queueWait: time.Since(dl.Published)}
	f.bindLog(ctx)
	d.track(f)
	defer d.untrack(f)
	hb := f.startHeartbeat()
	defer hb.stop()

	release, holdErr := d.holdRepo(ctx, t, s)
	defer release()
	if holdErr == nil {
		var releaseCluster func()
		releaseCluster, holdErr = d.holdCluster(ctx, f, s)
		defer releaseCluster()
	}
	if holdErr != nil && errors.Is(context.Cause(ctx), errShutdown) {
		f.log().Info("hand back held task")
		f.handBack(ctx, "worker shutdown: handed back")
		d.obs.TaskRequeued(ctx, t.ID, attempt, "shutdown")
		return
	}

	lease, ok := f.claim(ctx)
	if !ok {
		return
	}
	f.lease.Store(&lease)
	if f.charged() > d.cfg.MaxDeliver {
		// A reissued message is delivered past the task's limit only when
		// the worker of its last counted delivery stopped responding (the
		// server's own limit is per message).
		res := task.Result{Status: task.StateFailed, Fault: task.FaultInfra, Usage: redeliveryOf(lease, dl.Resumed).Spent,
			Reason: fmt.Sprintf("deliveries exhausted (%d): the worker stopped responding on the last attempt", d.cfg.MaxDeliver)}
		f.log().Warn("task dead-lettered: deliveries exhausted", "attempt", attempt)
		f.conclude(ctx, verdict{action: bury, result: res}, nil, 0)
		return
	}
	d.emit(context.WithoutCancel(ctx), task.Event{TaskID: t.ID, Kind: task.EventState, State: task.StateRunning})
	opCtx, opCancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	if ok, err := d.q.States.CancelRequested(opCtx, t.ID); ok {
		cancel(errCancelled)
	} else if err != nil {
		f.log().Warn("check cancel request", "err", err)
	}
	opCancel()

	runCtx := d.obs.TaskStarted(task.WithRedelivery(ctx, redeliveryOf(lease, dl.Resumed)), t, attempt, f.queueWait)
	f.bindLog(runCtx)
	pump := d.newEventPump(runCtx, f)
	f.events.Store(pump)
	start := time.Now()
	var rep task.Report
	if ctx.Err() == nil {
		f.log().Info("task started", "tenant", t.TenantName(), "attempt", attempt)
		rep = d.runner.Run(runCtx, t, attempt, pump.send)
	}
	elapsed := time.Since(start)
	cause := context.Cause(ctx) // before anything else can cancel ctx
	pump.close()
	if rep.Result.Status != "" {
		f.used = &rep.Result.Usage
	}
	var local error
	if cause == nil && rep.Result.Fault == task.FaultInfra {
		// Whose fault: this worker's (its engine, image or disk fails the
		// probe) or one that follows the task to any worker.
		local = d.localFault(ctx)
	}
	f.conclude(runCtx, decide(rep, cause, f.charged(), d.cfg, local), rep.Artifacts, elapsed)
}

// claim takes the task's state record for this delivery. It reports false
// when the delivery ends here: a copy of a running task's message, a final
// task's (finalized and acked), or the state store unavailable (redelivered
// after a backoff).
func (f *flight) claim(ctx context.Context) (Lease, bool) {
	d, dl, t, attempt := f.d, f.dl, f.t, f.attempt
	opCtx, opCancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	lease, prev, err := d.q.States.Acquire(opCtx, t, queue.Claim{Attempt: attempt, Worker: d.cfg.WorkerID, Message: dl.Message, Live: d.cfg.AckWait})
	opCancel()
	switch {
	case errors.Is(err, queue.ErrDuplicate):
		// The holder's own message stays queued until it finishes: ending
		// this copy loses nothing, and it cannot take the task over.
		f.log().Info("duplicate delivery of a running task ended without running", "attempt", attempt, "err", err)
		fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
		defer fcancel()
		if err := retryOp(fctx, func() error { return dl.Term(fctx, "") }); err != nil {
			f.log().Warn("end duplicate delivery", "err", err)
		}
		return lease, false
	case errors.Is(err, queue.ErrFinal):
		f.log().Info("delivery of a final task acked without running", "attempt", attempt)
		fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
		defer fcancel()
		if f.finalize(fctx, prev) {
			f.ack(fctx)
		}
		return lease, false
	case err != nil:
		f.log().Warn("claim task", "err", err)
		f.nak(d.cfg.backoff(attempt))
		d.obs.TaskRequeued(ctx, t.ID, attempt, "retry: state store unavailable")
		return lease, false
	}
	return lease, true
}

// redeliveryOf is what the runner of this attempt is told about the earlier
// ones: why the last ended, from the record the claim found, and what they
// spent.
func redeliveryOf(l Lease, resumed string) task.Redelivery {
	prev, cur := l.Previous(), l.Status()
	var r task.Redelivery
	if cur.Spent != nil {
		r.Spent = *cur.Spent
	}
	switch {
	case prev.State == task.StateRunning || prev.State == task.StateVerifying:
		r.Cause = fmt.Sprintf("worker %s stopped responding on attempt %d", prev.Worker, prev.Attempt)
	case prev.State == task.StateQueued && prev.Reason != "":
		r.Cause = prev.Reason
	case prev.State == task.StatePaused && resumed != "":
		// The resume's message came before its record said queued.
		r.Cause = resumed
	}
	return r
}

// decodeTask parses a task message. The message subject names the task; a
// body naming another id is invalid. The task's own rules were checked
// where it was submitted (queue.Submissions.Submit), and the worker checks
// them again before any work: they are not checked a third time here.
func decodeTask(data []byte, id string) (task.Task, error) {
	t, err := task.Decode(data)
	if err != nil {
		return task.Task{}, err
	}
	if t.ID == "" {
		t.ID = id
	}
	if !task.ValidID(id) || t.ID != id {
		return t, &task.ValidationError{Fields: []task.FieldError{{Field: "id", Problem: fmt.Sprintf("%q does not match the message subject", t.ID)}}}
	}
	return t, nil
}

// reject ends an invalid task: a rejected result (when the task can be
// named) and Term, so it is never delivered again.
func (d *Dispatcher) reject(ctx context.Context, dl *Delivery, t task.Task, verr error) {
	id := dl.TaskID
	log := logctx.Bind(ctx, d.log.With("task_id", id))
	log.Warn("reject invalid task", "err", verr)
	opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	if id != "" {
		var tp *task.Task
		if t.ID == id {
			tp = &t
		}
		res := task.Result{Status: task.StateRejected, Reason: verr.Error(), Attempt: dl.Attempt, Worker: d.cfg.WorkerID}
		st, written, err := d.q.States.Settle(opCtx, id, tp, res)
		if err != nil {
			log.Warn("record rejection", "err", err)
			_ = dl.Nak(d.cfg.backoff(dl.Attempt))
			return
		}
		if written {
			d.emit(opCtx, queue.ResultEvent(st))
			d.obs.TaskFinished(ctx, *st.Result, 0)
		}
		if err := d.finalizeStatus(opCtx, st); err != nil {
			log.Warn("finalize rejected task", "err", err)
		}
	}
	if err := dl.Term(opCtx, ""); err != nil {
		log.Warn("term invalid task", "err", err)
	}
}

// conclude carries out the verdict on how the run ended.
func (f *flight) conclude(ctx context.Context, v verdict, artifacts map[string][]byte, elapsed time.Duration) {
	d, t := f.d, f.t
	switch v.action {
	case discard:
		f.log().Warn("task taken over by another worker; result discarded", "attempt", f.attempt)
	case finish:
		f.finish(ctx, v.result, artifacts, elapsed, f.ack)
	case handBack:
		f.log().Info("hand back task at shutdown", "attempt", f.attempt)
		f.handBack(ctx, v.reason)
		d.obs.TaskRequeued(ctx, t.ID, f.attempt, "shutdown")
	case retry:
		f.log().Warn("infrastructure fault; task handed back", "attempt", f.attempt, "reason", v.reason)
		f.requeue(ctx, v.reason, v.delay)
		d.obs.TaskRequeued(ctx, t.ID, f.attempt, v.reason)
	case handOver:
		f.log().Warn("this worker's infrastructure is unusable; task handed over without counting the delivery", "attempt", f.attempt, "reason", v.reason)
		f.handOver(ctx, v.reason)
		d.obs.TaskRequeued(ctx, t.ID, f.attempt, v.reason)
	case pause:
		f.pause(ctx, *v.pause, artifacts, v.reason)
	case bury:
		f.finish(ctx, v.result, artifacts, elapsed, func(ctx context.Context) {
			err := retryOp(ctx, func() error { return f.dl.Term(ctx, v.result.Reason) })
			if err != nil {
				f.log().Error("dead-letter task", "err", err)
				return
			}
			d.obs.TaskDeadLettered(ctx, t.ID, v.result.Reason)
		})
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
