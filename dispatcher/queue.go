package dispatcher

import (
	"context"
	"time"

	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// Queue is what the dispatcher needs of the task queue, one interface per
// role. [NATS] returns the one a queue.Conn backs; tests use fakes.
type Queue struct {
	Work      Work
	States    States
	Events    EventPublisher
	Artifacts ArtifactStore
	// Limits holds the places under cluster-wide limits; only needed with
	// Config.Caps.
	Limits Semaphore
	// StoreReady, when set, reports whether the store takes writes (the
	// results and artifacts of tasks): it is part of the dispatcher's
	// probe, so a worker whose store cannot write takes no task.
	StoreReady func(ctx context.Context) error
}

func (q Queue) complete() bool {
	return q.Work != nil && q.States != nil && q.Events != nil && q.Artifacts != nil
}

// Work is the consuming side of the task queue.
type Work interface {
	// Open creates or updates the consumer the dispatcher fetches from.
	Open(ctx context.Context, cc queue.ConsumerConfig) error
	// Next waits up to wait for one delivery; nil when none came.
	Next(ctx context.Context, wait time.Duration) (*Delivery, error)
	// Lag reports the tasks waiting for a worker and those delivered but
	// not acknowledged.
	Lag(ctx context.Context) (pending, ackPending uint64, err error)
	// BuryExhausted waits up to wait for one task whose deliveries ran out
	// and fails it (a zero Buried when none).
	BuryExhausted(ctx context.Context, wait time.Duration) (queue.Buried, error)
}

// Delivery is one delivery of a task message.
type Delivery struct {
	// TaskID is the id the message subject names ("" when none).
	TaskID string
	// Data is the task as JSON.
	Data []byte
	// Attempt is the task's delivery count: 1 for the first (across the
	// messages it was reissued as).
	Attempt int
	// Free counts the task's earlier deliveries that do not count toward
	// its limit (handed back through no fault of the task, see
	// Acker.Reissue): Attempt - Free is what the limit is checked against.
	Free int
	// Resumed is why a paused task was queued again, on the message its
	// resume published: the record may still say paused when it arrives.
	Resumed string
	// Message is the message's sequence in the task stream (0: unknown).
	Message uint64
	// Published is when the task was stored.
	Published time.Time
	// Trace, when set, returns its argument with the trace context the
	// message carried.
	Trace func(context.Context) context.Context
	Acker
}

// Acker ends a delivery (exactly one of Ack, Nak, Term, Reissue) and keeps
// it alive meanwhile (InProgress).
type Acker interface {
	// Ack acknowledges the delivery; it may be retried.
	Ack(ctx context.Context) error
	// Nak hands it back for redelivery after delay (at once when <= 0).
	Nak(delay time.Duration) error
	// Term ends it for good; with a reason, after copying the message to
	// the dead letters.
	Term(ctx context.Context, deadReason string) error
	// InProgress restarts the delivery's AckWait.
	InProgress() error
	// Reissue hands it back as a new message with a fresh delivery count,
	// which carries the task's deliveries so far (this one counted free
	// when free is true) into the next Delivery's Attempt and Free.
	Reissue(ctx context.Context, free bool) error
}

// States is the task state store.
type States interface {
	// Acquire claims t for this run: an error wrapping queue.ErrFinal
	// (with the final status) when the task is already final, and one
	// wrapping queue.ErrDuplicate when another message's live holder runs it.
	Acquire(ctx context.Context, t task.Task, cl queue.Claim) (Lease, task.Status, error)
	// Settle writes a final result whatever the task's non-final state;
	// written is false when it was final already.
	Settle(ctx context.Context, id string, t *task.Task, res task.Result) (st task.Status, written bool, err error)
	// CancelRequested reports whether a cancellation of id was requested.
	CancelRequested(ctx context.Context, id string) (bool, error)
	// WatchCancels delivers the ids of cancellations requested from now on.
	WatchCancels(ctx context.Context) (<-chan string, error)
}

// Lease is a run's claim on a task's state record. Its writes fail with an
// error wrapping queue.ErrLostLease once another run took the task over.
//
// Its methods, more than five, are the life of one claim (write, keep
// alive, finish, hand back or pause; what it found and what it last
// wrote): they share the claim's revision, so they stay one interface.
type Lease interface {
	Update(ctx context.Context, fn func(*task.Status)) error
	Touch(ctx context.Context) error
	Finish(ctx context.Context, res task.Result) (task.Status, error)
	// Requeue hands the task back with reason; spent, when not nil, is
	// the model use of its attempts so far (Status.Spent).
	Requeue(ctx context.Context, reason string, spent *task.Usage) error
	// Pause records the task paused (p) rather than queued, with spent
	// and its message body kept for when it is resumed.
	Pause(ctx context.Context, p task.Pause, spent *task.Usage, message []byte) error
	// Previous is the task's record as the claim found it; Status as
	// this lease last wrote it.
	Previous() task.Status
	Status() task.Status
}

// EventPublisher publishes task events.
type EventPublisher interface {
	Publish(ctx context.Context, ev task.Event) error
}

// ArtifactStore stores a task's artifacts and returns their names.
type ArtifactStore interface {
	Put(ctx context.Context, id string, artifacts map[string][]byte) ([]string, error)
}

// NATS is the Queue of a NATS connection.
func NATS(c *queue.Conn) Queue {
	return Queue{Work: natsWork{c.Work()}, States: natsStates{c.States()}, Events: c.Events(), Artifacts: c.Artifacts(), Limits: c.Limits(),
		StoreReady: c.StoreReady}
}

type natsWork struct{ *queue.Work }

func (w natsWork) Next(ctx context.Context, wait time.Duration) (*Delivery, error) {
	d, err := w.Work.Next(ctx, wait)
	if d == nil || err != nil {
		return nil, err
	}
	return &Delivery{TaskID: d.TaskID, Data: d.Data, Attempt: d.Earlier + d.Attempt, Free: d.Free, Resumed: d.Resumed, Message: d.StreamSeq,
		Published: d.Published, Trace: d.Trace, Acker: d}, nil
}

type natsStates struct{ *queue.States }

func (s natsStates) Acquire(ctx context.Context, t task.Task, cl queue.Claim) (Lease, task.Status, error) {
	l, st, err := s.States.Acquire(ctx, t, cl)
	if l == nil {
		return nil, st, err
	}
	return l, st, err
}
