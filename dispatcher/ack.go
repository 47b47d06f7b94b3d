package dispatcher

import (
	"context"
	"errors"
	"time"

	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// finish stores the artifacts, then the final result (a result is not
// final until its artifacts are stored), publishes the result event, then
// settles the delivery with done. When another worker's result won, the
// delivery is left alone; when the store fails either write, the delivery
// is handed back (see storeFailed).
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
		err, fault := f.store(opCtx, func(ctx context.Context) (err error) {
			names, err = d.q.Artifacts.Put(ctx, t.ID, artifacts)
			return err
		})
		if err != nil {
			f.storeFailed(ctx, "store artifacts", err, fault)
			return
		}
		res.Artifacts = mergeNames(res.Artifacts, names)
	}
	lease := f.leaseOf()
	var st task.Status
	err, fault := f.store(opCtx, func(ctx context.Context) (err error) {
		st, err = lease.Finish(ctx, res)
		return err
	})
	if errors.Is(err, queue.ErrLostLease) {
		// Not necessarily "another worker finished": this attempt went
		// silent past the ack wait (a paused or cut-off process) and the
		// task was redelivered, cancelled or finished meanwhile.
		f.log().Warn("this attempt no longer holds the task; its result is discarded", "attempt", f.attempt,
			"now_state", st.State, "now_worker", st.Worker, "now_attempt", st.Attempt, "err", err)
		return
	}
	if err != nil {
		f.storeFailed(ctx, "write final result", err, fault)
		return
	}
	d.emit(opCtx, queue.ResultEvent(st))
	if !f.finalize(opCtx, st) {
		return
	}
	done(opCtx)
	f.log().Info("task finished", "tenant", t.TenantName(), "attempt", f.attempt, "status", st.State, "reason", st.Reason)
	d.obs.TaskFinished(ctx, *st.Result, elapsed)
}

// store runs write, one try bounded by storeTimeout (a store that lost a
// write never answers), until it succeeds, fails for good (a lost lease,
// a final task), ctx ends, or a failed try is followed by a failing probe
// (fault: the store or this worker is unusable, say a full disk; trying
// again would only hold the slot).
func (f *flight) store(ctx context.Context, write func(context.Context) error) (err, fault error) {
	err = retryOp(ctx, func() error {
		tctx, cancel := context.WithTimeout(ctx, storeTimeout)
		defer cancel()
		err := write(tctx)
		if err != nil && !errors.Is(err, queue.ErrLostLease) && !errors.Is(err, queue.ErrFinal) {
			if fault = f.d.localFault(ctx); fault != nil {
				return &storeFault{err}
			}
		}
		return err
	})
	var sf *storeFault
	if errors.As(err, &sf) {
		return sf.err, fault
	}
	return err, nil
}

// storeFault stops retryOp: the probe failed after the write did.
type storeFault struct{ err error }

func (e *storeFault) Error() string { return e.err.Error() }

// storeFailed hands back a delivery whose result the store did not take
// (op failed with err): never settled, so the task runs again. When the
// probe failed too (fault: the store cannot write, a full disk), this
// worker is unready and the task is handed over as a new message, the
// delivery not counted (counted after all if even that cannot be written);
// otherwise the delivery counts, with the usual backoff.
func (f *flight) storeFailed(ctx context.Context, op string, err, fault error) {
	d := f.d
	if fault != nil {
		f.log().Error(op+"; task handed over: the store is unusable", "attempt", f.attempt, "err", err, "probe", fault)
		reason := "worker fault: " + op + ": " + fault.Error()
		f.handOver(ctx, reason)
		d.obs.TaskRequeued(ctx, f.t.ID, f.attempt, reason)
		return
	}
	f.log().Error(op+"; task handed back", "attempt", f.attempt, "err", err)
	reason := "retry: " + op + ": " + err.Error()
	f.requeue(ctx, reason, d.cfg.backoff(f.charged()))
	d.obs.TaskRequeued(ctx, f.t.ID, f.attempt, reason)
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
		f.log().Warn("finalize task; the next delivery tries again", "attempt", f.attempt, "retry_in", delay, "err", err)
		f.nak(delay)
		return false
	}
	f.log().Error("finalize task: deliveries exhausted, giving up", "attempt", f.attempt, "err", err)
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

// pause records a task that a spend cap above it stopped as paused, with
// the artifacts of its work so far (its save point the worker stored
// already), and acks the delivery: it runs again only when resumed
// (queue.Submissions.Resume). When the record cannot be written the
// delivery is handed back instead, to pause again on its next run.
func (f *flight) pause(ctx context.Context, p task.Pause, artifacts map[string][]byte, reason string) {
	d, t := f.d, f.t
	opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	if len(artifacts) > 0 {
		err := retryOp(opCtx, func() (err error) {
			p.Artifacts, err = d.q.Artifacts.Put(opCtx, t.ID, artifacts)
			return err
		})
		if err != nil {
			f.log().Warn("store the artifacts of a paused task", "err", err)
		}
	}
	// This delivery does not count toward the task's limit: the pause is
	// not its fault.
	p.Free = f.free + 1
	err := retryOp(opCtx, func() error { return f.leaseOf().Pause(opCtx, p, f.used, f.dl.Data) })
	if errors.Is(err, queue.ErrLostLease) {
		f.log().Warn("this attempt no longer holds the task; its pause is discarded", "attempt", f.attempt, "err", err)
		return
	}
	if err != nil {
		f.log().Error("record the pause; task handed back", "err", err)
		f.nak(d.cfg.backoff(f.charged()))
		return
	}
	f.ack(opCtx)
	f.log().Info("task paused", "attempt", f.attempt, "reason", reason)
	d.obs.TaskPaused(ctx, t.ID, f.attempt, p.Reason)
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
		f.log().Warn("reissue handed-back task", "err", err)
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
			f.log().Warn("record hand-back", "err", err)
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
		f.log().Warn("nak task", "err", err)
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
		f.log().Warn("ack task", "err", err)
	}
}

// retryOp calls fn until it succeeds, fails with a lost lease, a final
// task or a store fault, or ctx ends.
func retryOp(ctx context.Context, fn func() error) error {
	wait := 100 * time.Millisecond
	for {
		err := fn()
		var sf *storeFault
		if err == nil || errors.Is(err, queue.ErrLostLease) || errors.Is(err, queue.ErrFinal) || errors.As(err, &sf) {
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

// emit publishes ev best effort, within opTimeout or ctx; a result event,
// which the event stream is asked to store once however often it is
// published again, within resultEventTimeout.
func (d *Dispatcher) emit(ctx context.Context, ev task.Event) {
	if ctx.Err() != nil {
		return
	}
	timeout := opTimeout
	if ev.Kind == task.EventResult {
		timeout = resultEventTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := d.q.Events.Publish(ctx, ev); err != nil {
		d.log.WarnContext(ctx, "publish event", "task_id", ev.TaskID, "kind", ev.Kind, "err", err)
	}
}
