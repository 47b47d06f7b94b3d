package dispatcher

import (
	"context"
	"errors"
	"time"

	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// finish stores the artifacts and the final result, publishes the result
// event, then settles the delivery with done. When another worker's result
// won, the delivery is left alone.
func (f *flight) finish(ctx context.Context, res task.Result, artifacts map[string][]byte, elapsed time.Duration, done func(context.Context)) {
	d, t := f.d, f.t
	opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	if res.Timings.QueueWait == 0 {
		res.Timings.QueueWait = f.queueWait
	}
	res.HandedBack = f.free
	if len(artifacts) > 0 {
		var names []string
		err := retryOp(opCtx, func() (err error) {
			names, err = d.q.Artifacts.Put(opCtx, t.ID, artifacts)
			return err
		})
		if err != nil {
			// Without ack the task is redelivered and runs again.
			d.log.Error("store artifacts; task will be redelivered", "task_id", t.ID, "err", err)
			return
		}
		res.Artifacts = mergeNames(res.Artifacts, names)
	}
	lease := f.leaseOf()
	var st task.Status
	err := retryOp(opCtx, func() (err error) {
		st, err = lease.Finish(opCtx, res)
		return err
	})
	if errors.Is(err, queue.ErrLostLease) {
		// Not necessarily "another worker finished": this attempt went
		// silent past the ack wait (a paused or cut-off process) and the
		// task was redelivered, cancelled or finished meanwhile.
		d.log.Warn("this attempt no longer holds the task; its result is discarded", "task_id", t.ID, "attempt", f.attempt,
			"now_state", st.State, "now_worker", st.Worker, "now_attempt", st.Attempt, "err", err)
		return
	}
	if err != nil {
		d.log.Error("write final result; task will be redelivered", "task_id", t.ID, "err", err)
		return
	}
	d.emit(opCtx, queue.ResultEvent(st))
	if !f.finalize(opCtx, st) {
		return
	}
	done(opCtx)
	d.log.Info("task finished", "task_id", t.ID, "attempt", f.attempt, "status", st.State, "reason", st.Reason)
	d.obs.TaskFinished(ctx, *st.Result, elapsed)
}

// finalize runs the Finalizer on st, the task's final status, and reports
// whether the delivery may be settled: false when it failed and the
// delivery was handed back so that the next one finalizes again.
func (f *flight) finalize(ctx context.Context, st task.Status) bool {
	d := f.d
	err := d.finalizeStatus(ctx, st)
	if err == nil {
		return true
	}
	d.emit(ctx, task.Event{TaskID: f.t.ID, Time: time.Now().UTC(), Kind: task.EventLog, IsError: true, Text: "finalize: " + err.Error()})
	if f.charged() < d.cfg.MaxDeliver {
		delay := d.cfg.backoff(f.charged())
		var ra interface{ RetryAfter() time.Duration }
		if errors.As(err, &ra) && ra.RetryAfter() > 0 {
			delay = min(delay, ra.RetryAfter())
		}
		d.log.Warn("finalize task; the next delivery tries again", "task_id", f.t.ID, "attempt", f.attempt, "retry_in", delay, "err", err)
		f.nak(delay)
		return false
	}
	d.log.Error("finalize task: deliveries exhausted, giving up", "task_id", f.t.ID, "attempt", f.attempt, "err", err)
	return true
}

// finalizeStatus calls the Finalizer, when there is one, on a final
// status that carries its task.
func (d *Dispatcher) finalizeStatus(ctx context.Context, st task.Status) error {
	if d.cfg.Finalizer == nil || st.Task == nil || !st.State.Final() {
		return nil
	}
	return d.cfg.Finalizer.Finalize(ctx, st)
}

// handBack returns a delivery at shutdown, which is no fault of the task: on
// its last delivery the task is reissued as a fresh message so that the
// hand-back does not exhaust it.
func (f *flight) handBack(ctx context.Context, reason string) {
	if f.charged() < f.d.cfg.MaxDeliver {
		f.requeue(ctx, reason, 0)
		return
	}
	f.reissue(ctx, reason, 0)
}

// handOver returns a delivery that this worker could not run because its
// own infrastructure is unusable: the task goes back as a new message
// (another worker may take it at once) and this delivery does not count
// toward its limit.
func (f *flight) handOver(ctx context.Context, reason string) {
	f.reissue(ctx, reason, f.d.cfg.ProbeInterval)
}

// reissue records the hand-back and puts the task on the queue again as a
// new message, this delivery counted free; when that fails, the delivery
// is handed back with a Nak after nakDelay instead (and counts).
func (f *flight) reissue(ctx context.Context, reason string, nakDelay time.Duration) {
	opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	if !f.markQueued(opCtx, reason) {
		return
	}
	if err := retryOp(opCtx, func() error { return f.dl.Reissue(opCtx, true) }); err != nil {
		f.d.log.Warn("reissue handed-back task", "task_id", f.t.ID, "err", err)
		f.nak(nakDelay)
	}
}

// requeue hands the delivery back: state queued with reason, Nak after delay.
func (f *flight) requeue(ctx context.Context, reason string, delay time.Duration) {
	if f.markQueued(ctx, reason) {
		f.nak(delay)
	}
}

// markQueued records a hand-back in the state (when this delivery holds the
// lease) and reports whether the delivery is still this worker's to return.
func (f *flight) markQueued(ctx context.Context, reason string) bool {
	if lease := f.leaseOf(); lease != nil {
		opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
		err := lease.Requeue(opCtx, reason, f.used)
		cancel()
		if err != nil {
			f.d.log.Warn("record hand-back", "task_id", f.t.ID, "err", err)
			if errors.Is(err, queue.ErrLostLease) {
				return false
			}
		}
		f.d.emit(context.WithoutCancel(ctx), task.Event{TaskID: f.t.ID, Kind: task.EventState, State: task.StateQueued, Text: reason})
	}
	return true
}

func (f *flight) nak(delay time.Duration) {
	if err := f.dl.Nak(delay); err != nil {
		f.d.log.Warn("nak task", "task_id", f.t.ID, "err", err)
	}
}

// ack acknowledges the delivery and waits for the server to confirm; if the
// ack is lost the task is redelivered, found final and acked then.
func (f *flight) ack(ctx context.Context) {
	err := retryOp(ctx, func() error {
		actx, cancel := context.WithTimeout(ctx, opTimeout)
		defer cancel()
		return f.dl.Ack(actx)
	})
	if err != nil {
		f.d.log.Warn("ack task", "task_id", f.t.ID, "err", err)
	}
}

// retryOp calls fn until it succeeds, fails with a lost lease, or ctx ends.
func retryOp(ctx context.Context, fn func() error) error {
	wait := 100 * time.Millisecond
	for {
		err := fn()
		if err == nil || errors.Is(err, queue.ErrLostLease) || errors.Is(err, queue.ErrFinal) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// emit publishes ev best effort, within opTimeout or ctx.
func (d *Dispatcher) emit(ctx context.Context, ev task.Event) {
	if ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if err := d.q.Events.Publish(ctx, ev); err != nil {
		d.log.Warn("publish event", "task_id", ev.TaskID, "kind", ev.Kind, "err", err)
	}
}
