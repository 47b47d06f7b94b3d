package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ConsumerConfig is the part of the workers consumer a dispatcher sets.
type ConsumerConfig struct {
	// AckWait is how long a delivery may go without an ack or InProgress
	// before the server redelivers it.
	AckWait time.Duration
	// MaxDeliver is how many times a task is delivered before it is dead.
	MaxDeliver int
}

// Work is the consuming role of a [Conn]: the durable workers consumer that
// every dispatcher shares, and the consumer of the server's max-deliveries
// advisories. It is safe for concurrent use.
type Work struct {
	c *Conn

	mu   sync.Mutex
	cc   ConsumerConfig
	cons jetstream.Consumer // nil until Open
	dead jetstream.Consumer
}

// Open creates or updates the workers consumer with cc, and the advisory
// consumer. Dispatchers sharing a stream share these consumers: the last
// one to call Open sets AckWait and MaxDeliver for all.
func (w *Work) Open(ctx context.Context, cc ConsumerConfig) error {
	w.mu.Lock()
	w.cc = cc
	w.mu.Unlock()
	if _, err := w.tasksConsumer(ctx, true); err != nil {
		return err
	}
	_, err := w.deadConsumer(ctx, true)
	return err
}

func (w *Work) tasksConsumer(ctx context.Context, fresh bool) (jetstream.Consumer, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cons != nil && !fresh {
		return w.cons, nil
	}
	if w.cc.AckWait <= 0 {
		return nil, errors.New("consume tasks: Work.Open was not called")
	}
	cons, err := w.c.tasks.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       WorkersConsumer,
		Description:   "Wrench workers",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       w.cc.AckWait,
		MaxDeliver:    w.cc.MaxDeliver,
		FilterSubject: TaskSubjectPrefix + ">",
		MaxAckPending: -1,
	})
	if err != nil {
		return nil, fmt.Errorf("create consumer %s: %w", WorkersConsumer, err)
	}
	w.cons = cons
	return cons, nil
}

func (w *Work) deadConsumer(ctx context.Context, fresh bool) (jetstream.Consumer, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dead != nil && !fresh {
		return w.dead, nil
	}
	cons, err := w.c.dead.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       DeadLetterConsumer,
		Description:   "Wrench dead-letter handling of max-deliveries advisories",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       time.Minute,
		FilterSubject: MaxDeliveriesAdvisory,
	})
	if err != nil {
		return nil, fmt.Errorf("create consumer %s: %w", DeadLetterConsumer, err)
	}
	w.dead = cons
	return cons, nil
}

// Next waits up to wait for one delivery and returns it; nil when none
// came. The wait is not cut short by ctx (a message the server sent while
// a cancelled fetch stopped listening would wait out its AckWait): keep wait
// short. A consumer deleted meanwhile (by an operator, or lost with a
// server) is created again.
func (w *Work) Next(ctx context.Context, wait time.Duration) (*Delivery, error) {
	cons, err := w.tasksConsumer(ctx, false)
	if err != nil {
		return nil, err
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(wait))
	if err == nil {
		for m := range batch.Messages() {
			return w.delivery(m)
		}
		err = batch.Error()
		if errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) {
			err = nil
		}
	}
	if isConsumerGone(err) {
		if _, cerr := w.tasksConsumer(ctx, true); cerr == nil {
			w.c.log.Warn("workers consumer was missing; recreated")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("fetch task: %w", err)
	}
	return nil, nil
}

// delivery wraps a fetched message. A message without metadata cannot be
// acknowledged properly: it is terminated and skipped.
func (w *Work) delivery(m jetstream.Msg) (*Delivery, error) {
	md, err := m.Metadata()
	if err != nil {
		w.c.log.Error("drop message without metadata", "subject", m.Subject(), "err", err)
		_ = m.Term()
		return nil, nil
	}
	earlier, free := reissueCounts(m.Headers())
	return &Delivery{
		TaskID:    taskIDFromSubject(m.Subject()),
		Data:      m.Data(),
		Attempt:   int(md.NumDelivered),
		Earlier:   earlier,
		Free:      free,
		StreamSeq: md.Sequence.Stream,
		Published: md.Timestamp,
		msg:       m,
		c:         w.c,
	}, nil
}

// isConsumerGone reports a fetch error that recreating the consumer cures.
func isConsumerGone(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, nats.ErrNoResponders)
}

// Lag returns how many tasks wait for a worker (pending) and how many were
// delivered and not yet acknowledged (ackPending, i.e. running), as the
// workers consumer counts them; it reads the consumer without creating or
// changing it. Before any worker created the consumer, every task in the
// stream is pending.
func (w *Work) Lag(ctx context.Context) (pending, ackPending uint64, err error) {
	cons, err := w.c.tasks.Consumer(ctx, WorkersConsumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		info, err := w.c.tasks.Info(ctx)
		if err != nil {
			return 0, 0, fmt.Errorf("read stream %s: %w", TasksStream, err)
		}
		return info.State.Msgs, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read consumer %s: %w", WorkersConsumer, err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("read consumer %s: %w", WorkersConsumer, err)
	}
	return info.NumPending, uint64(info.NumAckPending), nil
}

// BuryExhausted waits up to wait (or until ctx is done) for one captured
// max-deliveries advisory and handles it: a task whose worker died on its
// last delivery gets a failed result and goes to the dead-letter stream
// (see [Buried]). It returns a zero Buried when no advisory came or its
// message was already gone.
func (w *Work) BuryExhausted(ctx context.Context, wait time.Duration) (Buried, error) {
	cons, err := w.deadConsumer(ctx, false)
	if err != nil {
		return Buried{}, err
	}
	fctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	batch, err := cons.Fetch(1, jetstream.FetchContext(fctx))
	if err != nil {
		return Buried{}, fmt.Errorf("fetch max-deliveries advisory: %w", err)
	}
	var b Buried
	for m := range batch.Messages() {
		b, err = w.bury(ctx, m)
	}
	if berr := batch.Error(); isConsumerGone(berr) {
		_, _ = w.deadConsumer(ctx, true)
	}
	return b, err
}

func (w *Work) bury(ctx context.Context, m jetstream.Msg) (Buried, error) {
	adv, err := parseDeliveryExceeded(m.Data())
	if err != nil {
		_ = m.Term()
		return Buried{}, err
	}
	w.mu.Lock()
	live := w.cc.AckWait
	w.mu.Unlock()
	b, err := w.c.buryExhausted(ctx, adv, live)
	if err != nil {
		_ = m.NakWithDelay(time.Second)
		return Buried{}, err
	}
	_ = m.Ack()
	return b, nil
}

// Delivery is one delivery of a task message. Exactly one of Ack, Nak, Term
// and Reissue ends it; InProgress keeps it alive meanwhile.
type Delivery struct {
	// TaskID is the id in the message subject ("" when the subject names
	// no valid id).
	TaskID string
	// Data is the message body: the task as JSON.
	Data []byte
	// Attempt is this message's delivery count: 1 for its first delivery.
	Attempt int
	// Earlier counts the task's deliveries from the messages this one was
	// reissued from (see [Delivery.Reissue]), and Free how many of those
	// did not count toward the task's delivery limit: the task's own
	// delivery number is Earlier + Attempt.
	Earlier, Free int
	// StreamSeq is the message's sequence in the task stream.
	StreamSeq uint64
	// Published is when the message was stored.
	Published time.Time

	msg jetstream.Msg
	c   *Conn
}

// Trace returns ctx extended with the trace context the message carries,
// when the Conn has a Propagator.
func (d *Delivery) Trace(ctx context.Context) context.Context {
	return d.c.extractTrace(ctx, d.msg.Headers())
}

// Ack acknowledges the delivery and waits for the server to confirm it. An
// Ack after a confirmed one succeeds, so Ack may be retried.
func (d *Delivery) Ack(ctx context.Context) error {
	if err := d.msg.DoubleAck(ctx); err != nil && !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
		return err
	}
	return nil
}

// InProgress tells the server the delivery is still being worked on,
// restarting its AckWait.
func (d *Delivery) InProgress() error { return d.msg.InProgress() }

// Nak hands the delivery back for redelivery after delay. A delay of zero
// or less redelivers at once, as a Nak with a negligible delay rather than
// a plain Nak: for a delayed Nak the server also rewrites the delivery's
// time in the consumer's stored state (as expired), while a plain Nak only
// queues the redelivery in memory. So when the server stops right after
// (the embedded NATS of `wrench serve` at shutdown), the restarted server
// redelivers the task at once instead of after AckWait from its last
// heartbeat.
func (d *Delivery) Nak(delay time.Duration) error {
	return d.msg.NakWithDelay(max(delay, time.Nanosecond))
}

// Term ends the delivery for good: the task is never delivered again. With
// a reason, the message is first copied to the dead-letter stream
// (idempotently, so Term may be retried).
func (d *Delivery) Term(ctx context.Context, deadReason string) error {
	if deadReason != "" && d.TaskID != "" {
		if err := d.c.deadLetter(ctx, d.TaskID, d.msg.Data(), d.msg.Headers(), d.StreamSeq, d.Attempt, deadReason); err != nil {
			return err
		}
	}
	return d.msg.Term()
}

// Reissue puts the task on the work queue again as a new message, with a
// fresh delivery count, and acknowledges this delivery: how a delivery
// handed back through no fault of the task (its worker's own engine is
// unusable, or it shuts down on the task's last attempt) avoids being
// counted toward the task's limit, which JetStream counts per message. The
// new message carries the task's deliveries so far in its headers
// (Earlier, Free), with this one counted free when free is true. Its id is
// derived from this one's stream sequence, so retrying is safe.
func (d *Delivery) Reissue(ctx context.Context, free bool) error {
	hdr := nats.Header{}
	for k, v := range d.msg.Headers() {
		hdr[k] = v
	}
	f := d.Free
	if free {
		f++
	}
	hdr.Set(HeaderEarlierDeliveries, strconv.Itoa(d.Earlier+d.Attempt))
	hdr.Set(HeaderFreeDeliveries, strconv.Itoa(f))
	if err := d.c.republish(ctx, d.TaskID, d.msg.Data(), hdr, d.StreamSeq); err != nil {
		return err
	}
	return d.Ack(ctx)
}

// Headers of a reissued task message (see [Delivery.Reissue]).
const (
	// HeaderEarlierDeliveries counts the task's deliveries from the
	// messages before this one.
	HeaderEarlierDeliveries = "Wrench-Earlier-Deliveries"
	// HeaderFreeDeliveries counts those of them that did not count toward
	// the task's delivery limit.
	HeaderFreeDeliveries = "Wrench-Free-Deliveries"
)

// reissueCounts reads a message's earlier and free delivery counts (zero
// when absent or malformed; free never above earlier).
func reissueCounts(h nats.Header) (earlier, free int) {
	earlier, _ = strconv.Atoi(h.Get(HeaderEarlierDeliveries))
	free, _ = strconv.Atoi(h.Get(HeaderFreeDeliveries))
	earlier = max(earlier, 0)
	return earlier, min(max(free, 0), earlier)
}
