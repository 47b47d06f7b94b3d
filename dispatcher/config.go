package dispatcher

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// Runner runs one task end to end. The worker package implements it.
//
// Run must return when ctx is done (the task was cancelled, the worker is
// shutting down past its grace period, or another worker took the task
// over), after removing whatever it started (sandbox, workspace). onEvent may
// be called from any goroutine until Run returns, never after.
type Runner interface {
	Run(ctx context.Context, t task.Task, attempt int, onEvent func(task.Event)) task.Report
}

// RunnerFunc adapts a function to [Runner].
type RunnerFunc func(ctx context.Context, t task.Task, attempt int, onEvent func(task.Event)) task.Report

// Run calls f.
func (f RunnerFunc) Run(ctx context.Context, t task.Task, attempt int, onEvent func(task.Event)) task.Report {
	return f(ctx, t, attempt, onEvent)
}

// Config configures a [Dispatcher]. Zero fields take the defaults below.
type Config struct {
	// Slots is how many tasks run at once (1). The dispatcher fetches a task
	// only when a slot is free, so it never runs more than Slots.
	Slots int
	// WorkerID names this worker in task states and results (host-pid).
	WorkerID string
	// PerRepoLimit caps how many tasks of one repository (by URL) this
	// worker runs at once; 0 means no cap. A task over the cap is held,
	// heartbeated and without a slot (other repositories' tasks run
	// meanwhile), until one of the same repository finishes. A worker
	// holds at most 2 x Slots deliveries, running or waiting.
	PerRepoLimit int
	// Caps, when set, are cluster-wide limits on the tasks of a tenant and
	// of a repository running at once across every worker sharing the
	// queue (the policy's max_running), enforced with the queue's Limits
	// semaphore (required then). A task over a limit is held like one over
	// PerRepoLimit; a tenant at its limit is skipped when fetching, so its
	// tasks wait in the queue and other tenants' go ahead.
	Caps Caps
	// Tenants are the tenants the policy names: their consumers are made
	// when the queue is opened, before any of their tasks arrives, so an
	// autoscaler reading them works from the start.
	Tenants []string
	// Grace is how long running tasks may go on after Run's ctx is done
	// before they are cancelled and handed back; 0 hands them back at once.
	Grace time.Duration
	// AckWait is how long a delivery may go without an ack or heartbeat
	// before the server hands it to another worker (30s). Heartbeats are
	// sent every AckWait/3.
	AckWait time.Duration
	// MaxDeliver is how many deliveries a task gets (5). A task that asks
	// for a retry on its last delivery, or whose worker dies on it, fails
	// and goes to the dead-letter stream.
	MaxDeliver int
	// Backoff is the redelivery delay after an infrastructure fault, by
	// attempt (the last entry repeats): 5s, 30s, 2m.
	Backoff []time.Duration
	// FetchWait is how long one pull waits for a task (1s); it bounds how
	// long stopping to fetch takes.
	FetchWait time.Duration
	// Probe checks that this worker's own infrastructure (its sandbox
	// engine, its image, its disk) is usable; nil takes the Runner's when
	// it is a [Prober], else none. It runs before the first fetch, after
	// every run that failed for the infrastructure's reasons, and every
	// ProbeInterval while it fails. While it fails the dispatcher is
	// unready ([Dispatcher.Ready]) and fetches nothing, and the run that
	// found the fault is handed back without counting toward the task's
	// deliveries.
	Probe func(ctx context.Context) error
	// ProbeInterval is how often an unready dispatcher probes again (5s).
	ProbeInterval time.Duration
	// Observer receives metrics and trace hooks (NopObserver).
	Observer Observer
	// Finalizer, when set, carries out each final task's effects outside
	// Wrench (see [Finalizer]).
	Finalizer Finalizer
	// Logger receives the dispatcher's log (discarded when nil).
	Logger *slog.Logger
}

// Finalizer carries out a task's effects outside Wrench once its final
// result is stored: a pull request, an issue comment. The dispatcher calls
// it after storing a final result and before acknowledging the delivery;
// on every later delivery of a task already final (a redelivery after a
// worker died or was paused, a duplicate message), before acking it; and
// after dead-lettering a task whose worker died on its last delivery. So
// it runs at least once per final task, often more: it must be
// idempotent, and exactly-once per effect is its job (an effects ledger).
//
// When it fails, the delivery is handed back with the backoff of
// Config.Backoff, or sooner when the error has a RetryAfter() method (the
// effects are claimed by another worker until then); the task stays
// final and the next delivery finalizes again. On the last delivery the
// failure is logged and reported as an error event and the delivery
// acknowledged.
type Finalizer interface {
	Finalize(ctx context.Context, st task.Status) error
}

// Defaults for zero Config fields.
const (
	DefaultAckWait    = 30 * time.Second
	DefaultMaxDeliver = 5
	DefaultFetchWait  = time.Second
	// DefaultProbeInterval is the default Config.ProbeInterval.
	DefaultProbeInterval = 5 * time.Second
)

// DefaultBackoff is the default Config.Backoff.
func DefaultBackoff() []time.Duration {
	return []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute}
}

func (c Config) withDefaults() (Config, error) {
	if c.Slots == 0 {
		c.Slots = 1
	}
	if c.Slots < 0 {
		return c, fmt.Errorf("dispatcher: Slots must be positive, got %d", c.Slots)
	}
	if c.PerRepoLimit < 0 {
		return c, fmt.Errorf("dispatcher: PerRepoLimit must not be negative, got %d", c.PerRepoLimit)
	}
	if c.Grace < 0 {
		return c, fmt.Errorf("dispatcher: Grace must not be negative, got %s", c.Grace)
	}
	if c.WorkerID == "" {
		host, _ := os.Hostname()
		if host == "" {
			host = "worker"
		}
		c.WorkerID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if c.AckWait == 0 {
		c.AckWait = DefaultAckWait
	}
	if c.AckWait < 300*time.Millisecond {
		return c, fmt.Errorf("dispatcher: AckWait must be at least 300ms, got %s", c.AckWait)
	}
	if c.MaxDeliver == 0 {
		c.MaxDeliver = DefaultMaxDeliver
	}
	if c.MaxDeliver < 1 {
		return c, fmt.Errorf("dispatcher: MaxDeliver must be at least 1, got %d", c.MaxDeliver)
	}
	if len(c.Backoff) == 0 {
		c.Backoff = DefaultBackoff()
	}
	if c.FetchWait == 0 {
		c.FetchWait = DefaultFetchWait
	}
	if c.ProbeInterval <= 0 {
		c.ProbeInterval = DefaultProbeInterval
	}
	if c.Observer == nil {
		c.Observer = NopObserver{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// backoff is the redelivery delay after attempt.
func (c Config) backoff(attempt int) time.Duration {
	i := min(max(attempt-1, 0), len(c.Backoff)-1)
	return c.Backoff[i]
}

// Observer receives the dispatcher's lifecycle hooks, for metrics and
// traces. Methods are called from many goroutines and must not block. Embed
// [NopObserver] to implement only some.
//
// It has more methods than the five an interface here usually has because
// it is one sink (telemetry's) for every point of a delivery's life:
// split, each part would be wired the same way to the same value.
type Observer interface {
	// TaskStarted is called when a delivery is about to run: attempt is the
	// delivery count (>1 is a redelivery), queueWait the time since the task
	// was first stored. The returned context is the run's (e.g. with a span
	// started under the trace context the task carried).
	TaskStarted(ctx context.Context, t task.Task, attempt int, queueWait time.Duration) context.Context
	// TaskEvent is called for each event the runner reports.
	TaskEvent(ctx context.Context, ev task.Event)
	// TaskFinished is called when this worker wrote a task's final result
	// (including rejections of invalid tasks and dead letters it handled),
	// with the time the run took (0 when it did not run). ctx is the one
	// TaskStarted returned, or a background one.
	TaskFinished(ctx context.Context, res task.Result, elapsed time.Duration)
	// TaskRequeued is called when a delivery is handed back for another
	// attempt: reason is "retry: …" (an infrastructure fault that counts
	// toward the task's deliveries), "worker fault: …" (this worker's own
	// infrastructure is unusable; it does not count) or "shutdown".
	TaskRequeued(ctx context.Context, id string, attempt int, reason string)
	// TaskPaused is called when a task is paused rather than finished
	// (reason task.ReasonBudget: a spend cap above it would be crossed).
	TaskPaused(ctx context.Context, id string, attempt int, reason string)
	// TaskDeadLettered is called when a task is moved to the dead-letter
	// stream.
	TaskDeadLettered(ctx context.Context, id string, reason string)
	// Slots reports slot use whenever it changes.
	Slots(busy, total int)
	// ConsumerLag reports, every few seconds, the tasks waiting for a worker
	// (pending) and those delivered but not acked (ackPending).
	ConsumerLag(pending, ackPending uint64)
	// Readiness reports whether the dispatcher takes tasks, when it starts
	// and whenever that changes (see [Dispatcher.Ready]).
	Readiness(ready bool)
}

// NopObserver ignores every hook.
type NopObserver struct{}

var _ Observer = NopObserver{}

// TaskStarted returns ctx.
func (NopObserver) TaskStarted(ctx context.Context, _ task.Task, _ int, _ time.Duration) context.Context {
	return ctx
}

// TaskEvent does nothing.
func (NopObserver) TaskEvent(context.Context, task.Event) {}

// TaskFinished does nothing.
func (NopObserver) TaskFinished(context.Context, task.Result, time.Duration) {}

// TaskRequeued does nothing.
func (NopObserver) TaskRequeued(context.Context, string, int, string) {}

// TaskPaused does nothing.
func (NopObserver) TaskPaused(context.Context, string, int, string) {}

// TaskDeadLettered does nothing.
func (NopObserver) TaskDeadLettered(context.Context, string, string) {}

// Slots does nothing.
func (NopObserver) Slots(int, int) {}

// ConsumerLag does nothing.
func (NopObserver) ConsumerLag(uint64, uint64) {}

// Readiness does nothing.
func (NopObserver) Readiness(bool) {}
