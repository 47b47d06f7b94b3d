package telemetry

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/wrenchworks/wrench/dispatcher"
	"github.com/wrenchworks/wrench/task"
)

// Observer feeds the dispatcher's hooks into [Metrics] and, per attempt, a
// [TaskTracer] span tree. Either may be nil. It is safe for concurrent use.
type Observer struct {
	metrics *Metrics
	tracer  *TaskTracer
	log     *slog.Logger
}

var _ dispatcher.Observer = (*Observer)(nil)

// NewObserver returns an Observer; log (may be nil) gets a debug line per
// hook.
func NewObserver(m *Metrics, tt *TaskTracer, log *slog.Logger) *Observer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Observer{metrics: m, tracer: tt, log: log}
}

type runKey struct{}

// run is one attempt's telemetry, carried in the run's context.
type run struct {
	spans *TaskSpans
	once  sync.Once
}

// end runs fn once per attempt: whichever of finish or requeue comes first.
func (o *Observer) end(ctx context.Context, fn func(r *run)) bool {
	r, ok := ctx.Value(runKey{}).(*run)
	if !ok {
		return false
	}
	ended := false
	r.once.Do(func() {
		ended = true
		if o.metrics != nil {
			o.metrics.TaskEnded()
		}
		fn(r)
	})
	return ended
}

// TaskStarted counts the attempt, opens its task span under the trace
// context ctx carries, and returns a context with the span and the task id
// (for [ContextHandler] log lines).
func (o *Observer) TaskStarted(ctx context.Context, t task.Task, attempt int, queueWait time.Duration) context.Context {
	if o.metrics != nil {
		o.metrics.TaskStarted(queueWait, attempt)
		o.metrics.TenantStarted(t.TenantName(), queueWait)
	}
	r := &run{}
	if o.tracer != nil {
		ctx, r.spans = o.tracer.Start(ctx, t, attempt, time.Time{})
	}
	ctx = WithTaskID(context.WithValue(ctx, runKey{}, r), t.ID)
	o.log.DebugContext(ctx, "task started", "attempt", attempt, "queue_wait", queueWait)
	return ctx
}

// TaskEvent counts the event and advances the attempt's spans.
func (o *Observer) TaskEvent(ctx context.Context, ev task.Event) {
	if o.metrics != nil {
		o.metrics.ObserveEvent(ev)
	}
	if r, ok := ctx.Value(runKey{}).(*run); ok && r.spans != nil {
		r.spans.Event(ev)
	}
}

// TaskFinished counts the final result and closes the attempt's spans.
func (o *Observer) TaskFinished(ctx context.Context, res task.Result, elapsed time.Duration) {
	if o.metrics != nil {
		o.metrics.TaskFinished(res, elapsed)
	}
	o.end(ctx, func(r *run) {
		if r.spans != nil {
			r.spans.End(res, time.Time{})
		}
	})
}

// TaskRequeued counts the hand-back and, for a running attempt, closes its
// spans with the reason.
func (o *Observer) TaskRequeued(ctx context.Context, id string, attempt int, reason string) {
	if o.metrics != nil {
		o.metrics.TaskRequeued(reason)
	}
	o.end(ctx, func(r *run) {
		if r.spans != nil {
			r.spans.End(task.Result{TaskID: id, Status: task.StateQueued, Reason: reason, Attempt: attempt}, time.Time{})
		}
	})
}

// TaskPaused counts the pause and closes the attempt's spans.
func (o *Observer) TaskPaused(ctx context.Context, id string, attempt int, reason string) {
	if o.metrics != nil {
		o.metrics.TaskPaused(reason)
	}
	o.end(ctx, func(r *run) {
		if r.spans != nil {
			r.spans.End(task.Result{TaskID: id, Status: task.StatePaused, Reason: reason, Attempt: attempt}, time.Time{})
		}
	})
}

// TaskDeadLettered counts a dead letter.
func (o *Observer) TaskDeadLettered(ctx context.Context, id string, reason string) {
	if o.metrics != nil {
		o.metrics.DeadLettered()
	}
	o.log.DebugContext(ctx, "task dead-lettered", "task_id", id, "reason", reason)
}

// Slots records slot use.
func (o *Observer) Slots(busy, total int) {
	if o.metrics != nil {
		o.metrics.SetSlots(total, total-busy)
	}
}

// Readiness records whether the dispatcher takes tasks.
func (o *Observer) Readiness(ready bool) {
	if o.metrics != nil {
		o.metrics.SetWorkerReady(ready)
	}
}

// ConsumerLag records the work queue's lag.
func (o *Observer) ConsumerLag(pending, ackPending uint64) {
	if o.metrics != nil {
		o.metrics.SetConsumerLag(pending, ackPending)
	}
}
