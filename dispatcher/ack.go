package dispatcher

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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
	if len(artifacts) > 0 {
		var names []string
		err := retry(opCtx, func() (err error) {
			names, err = d.conn.PutArtifacts(opCtx, t.ID, artifacts)
			return err
		})
		if err != nil {
			// Without ack the task is redelivered and runs again.
			d.log.Error("store artifacts; task will be redelivered", "task_id", t.ID, "err", err)
			return
		}
		res.Artifacts = mergeNames(res.Artifacts, names)
	}
	lease := f.lease.Load()
	var st task.Status
	err := retry(opCtx, func() (err error) {
		st, err = lease.Finish(opCtx, res)
		return err
	})
	if errors.Is(err, queue.ErrLostLease) {
		d.log.Warn("another worker finished the task; result discarded", "task_id", t.ID, "attempt", f.attempt)
		return
	}
	if err != nil {
		d.log.Error("write final result; task will be redelivered", "task_id", t.ID, "err", err)
		return
	}
	d.emit(opCtx, queue.ResultEvent(st))
	done(opCtx)
	d.log.Info("task finished", "task_id", t.ID, "attempt", f.attempt, "status", st.State, "reason", st.Reason)
	d.obs.TaskFinished(ctx, *st.Result, elapsed)
}

// handBack returns a delivery at shutdown, which is no fault of the task: on
// its last delivery the task is republished as a fresh message (and the old
// one acked) so that the hand-back does not exhaust it.
func (f *flight) handBack(ctx context.Context, reason string) {
	if f.attempt < f.d.cfg.MaxDeliver {
		f.requeue(ctx, reason, 0)
		return
	}
	opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	if !f.markQueued(opCtx, reason) {
		return
	}
	err := retry(opCtx, func() error {
		return f.d.conn.Republish(opCtx, f.t.ID, f.msg.Data(), f.msg.Headers(), f.streamSeq)
	})
	if err != nil {
		f.d.log.Warn("republish handed-back task", "task_id", f.t.ID, "err", err)
		f.nak(0)
		return
	}
	f.ack(opCtx)
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
	if lease := f.lease.Load(); lease != nil {
		opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
		err := lease.Requeue(opCtx, reason)
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
	var err error
	if delay > 0 {
		err = f.msg.NakWithDelay(delay)
	} else {
		err = nakNow(f.msg)
	}
	if err != nil {
		f.d.log.Warn("nak task", "task_id", f.t.ID, "err", err)
	}
}

// nakNow hands msg back for redelivery at once. It is a Nak with an
// explicit, negligible delay rather than a plain Nak: for a delayed Nak the
// server also rewrites the delivery's time in the consumer's stored state
// (as expired), while a plain Nak only queues the redelivery in memory. So
// when the server stops right after (the embedded NATS of `wrench serve`
// at shutdown), the restarted server redelivers the task at once instead of
// after AckWait from its last heartbeat.
func nakNow(msg jetstream.Msg) error { return msg.NakWithDelay(time.Nanosecond) }

// ack acknowledges the delivery and waits for the server to confirm; if the
// ack is lost the task is redelivered, found final and acked then.
func (f *flight) ack(ctx context.Context) {
	err := retry(ctx, func() error {
		actx, cancel := context.WithTimeout(ctx, opTimeout)
		defer cancel()
		return f.msg.DoubleAck(actx)
	})
	if err != nil {
		f.d.log.Warn("ack task", "task_id", f.t.ID, "err", err)
	}
}

// retry calls fn until it succeeds, fails with a lost lease, or ctx ends.
func retry(ctx context.Context, fn func() error) error {
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
	if err := d.conn.PublishEvent(ctx, ev); err != nil {
		d.log.Warn("publish event", "task_id", ev.TaskID, "kind", ev.Kind, "err", err)
	}
}
