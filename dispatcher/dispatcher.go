package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/queue"
)

// Causes with which a run's context is cancelled.
var (
	errCancelled = errors.New("task cancelled")
	errShutdown  = errors.New("worker shutting down")
	errLostLease = errors.New("task taken over by another worker")
)

// lagInterval is how often consumer lag is reported.
const lagInterval = 5 * time.Second

// Dispatcher pulls tasks off the work queue and runs them with a [Runner],
// managing each delivery's acknowledgement: heartbeats while a task runs, Ack
// once its final result is stored, Nak with backoff on infrastructure faults,
// Term for invalid tasks, dead letter when deliveries run out.
type Dispatcher struct {
	conn   *queue.Conn
	runner Runner
	cfg    Config
	log    *slog.Logger
	obs    Observer

	started  atomic.Bool
	slots    chan struct{} // one per running task
	inbox    chan struct{} // one per delivery held: running or waiting
	handlers sync.WaitGroup

	mu      sync.Mutex
	running map[*flight]struct{}
	repos   map[string]int
	repoCh  chan struct{} // closed and replaced when a repo slot frees
}

// New returns a dispatcher that runs tasks from conn with runner. It does
// nothing until [Dispatcher.Run].
func New(conn *queue.Conn, runner Runner, cfg Config) (*Dispatcher, error) {
	if conn == nil || runner == nil {
		return nil, errors.New("dispatcher: conn and runner are required")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Dispatcher{
		conn:    conn,
		runner:  runner,
		cfg:     cfg,
		log:     cfg.Logger.With("worker", cfg.WorkerID),
		obs:     cfg.Observer,
		slots:   make(chan struct{}, cfg.Slots),
		inbox:   make(chan struct{}, 2*cfg.Slots),
		running: make(map[*flight]struct{}),
		repos:   make(map[string]int),
		repoCh:  make(chan struct{}),
	}, nil
}

// WorkerID returns the id this dispatcher writes into task states.
func (d *Dispatcher) WorkerID() string { return d.cfg.WorkerID }

// Run fetches and runs tasks until ctx is done, then shuts down gracefully:
// it stops fetching, lets running tasks finish for up to Config.Grace, then
// cancels the rest (their runners remove their sandboxes) and hands them back
// to the queue for another worker. It returns nil after a graceful shutdown,
// or an error if it could not start. Run may be called once.
func (d *Dispatcher) Run(ctx context.Context) error {
	if !d.started.CompareAndSwap(false, true) {
		return errors.New("dispatcher: Run called twice")
	}
	cons, err := d.conn.TaskConsumer(ctx, d.consumerConfig())
	if err == nil {
		var deadCons jetstream.Consumer
		if deadCons, err = d.conn.DeadLetterAdvisories(ctx); err == nil {
			return d.run(ctx, cons, deadCons)
		}
	}
	if ctx.Err() != nil {
		return nil // stopped before it started
	}
	return fmt.Errorf("dispatcher: %w", err)
}

func (d *Dispatcher) consumerConfig() queue.ConsumerConfig {
	return queue.ConsumerConfig{AckWait: d.cfg.AckWait, MaxDeliver: d.cfg.MaxDeliver}
}

func (d *Dispatcher) run(ctx context.Context, cons, deadCons jetstream.Consumer) error {
	// Background helpers and runs outlive ctx: they stop on their own
	// schedule during shutdown.
	bg, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	runBase, stopRuns := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopRuns(errShutdown)
	cancels, err := d.conn.WatchCancels(bg)
	if err != nil {
		stopBg()
		return fmt.Errorf("dispatcher: %w", err)
	}
	var bgWG sync.WaitGroup
	bgWG.Go(func() { d.routeCancels(cancels) })
	bgWG.Go(func() { d.deadLetterLoop(bg, deadCons) })
	bgWG.Go(func() { d.lagLoop(bg, cons) })

	d.log.Info("dispatcher started", "slots", d.cfg.Slots, "ack_wait", d.cfg.AckWait, "max_deliver", d.cfg.MaxDeliver)
	d.obs.Slots(0, d.cfg.Slots)
	d.fetchLoop(ctx, cons, runBase)

	n := d.inFlight()
	d.log.Info("dispatcher stopping: no more fetches", "in_flight", n, "grace", d.cfg.Grace)
	if d.cfg.Grace > 0 {
		timer := time.AfterFunc(d.cfg.Grace, func() { stopRuns(errShutdown) })
		defer timer.Stop()
	} else {
		stopRuns(errShutdown)
	}
	d.handlers.Wait()
	stopBg()
	bgWG.Wait()
	d.log.Info("dispatcher stopped")
	return nil
}

// fetchLoop pulls one task per free slot until ctx is done. A fetch also
// needs room in the inbox, which bounds the deliveries this worker holds
// (2 x Slots): those running, and those waiting without a slot for their
// repository's turn (see holdRepo).
func (d *Dispatcher) fetchLoop(ctx context.Context, cons jetstream.Consumer, runBase context.Context) {
	failures := 0
	for {
		select {
		case d.inbox <- struct{}{}:
		case <-ctx.Done():
			return
		}
		s := &runSlot{d: d}
		if s.acquire(ctx) != nil {
			<-d.inbox
			return
		}
		msg, err := d.fetchOne(cons)
		if isConsumerGone(err) {
			// Deleted (by an operator, or lost with a server): put it
			// back; CreateOrUpdate is idempotent.
			if c, cerr := d.conn.TaskConsumer(ctx, d.consumerConfig()); cerr == nil {
				cons = c
				d.log.Warn("workers consumer was missing; recreated")
			}
		}
		if err != nil || msg == nil {
			s.release()
			<-d.inbox
		}
		if err != nil {
			failures++
			wait := min(time.Duration(failures)*100*time.Millisecond, 2*time.Second)
			d.log.Warn("fetch task", "err", err, "retry_in", wait)
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return
			}
			continue
		}
		failures = 0
		if msg == nil {
			continue
		}
		if ctx.Err() != nil {
			// Fetched while stopping: hand it straight back.
			nakNow(msg)
			s.release()
			<-d.inbox
			return
		}
		d.handlers.Go(func() {
			defer func() {
				s.release()
				<-d.inbox
			}()
			d.handle(runBase, msg, s)
		})
	}
}

// runSlot is one delivery's claim on one of the Slots. It is used by one
// goroutine at a time.
type runSlot struct {
	d    *Dispatcher
	held bool
}

// acquire waits for a free slot (at once when this claim holds one).
func (s *runSlot) acquire(ctx context.Context) error {
	if s.held {
		return nil
	}
	select {
	case s.d.slots <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	s.held = true
	s.d.obs.Slots(len(s.d.slots), s.d.cfg.Slots)
	return nil
}

// release frees the slot, if this claim holds one.
func (s *runSlot) release() {
	if !s.held {
		return
	}
	<-s.d.slots
	s.held = false
	s.d.obs.Slots(len(s.d.slots), s.d.cfg.Slots)
}

// fetchOne waits up to FetchWait for one task; nil when none came.
func (d *Dispatcher) fetchOne(cons jetstream.Consumer) (jetstream.Msg, error) {
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(d.cfg.FetchWait))
	if err != nil {
		return nil, err
	}
	var msg jetstream.Msg
	for m := range batch.Messages() {
		msg = m
	}
	if msg != nil {
		return msg, nil
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, nats.ErrTimeout) {
		return nil, err
	}
	return nil, nil
}

func (d *Dispatcher) inFlight() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.running)
}

// routeCancels delivers cancellation requests to the runs they name.
func (d *Dispatcher) routeCancels(ids <-chan string) {
	for id := range ids {
		d.mu.Lock()
		for f := range d.running {
			if f.t.ID == id {
				f.cancel(errCancelled)
			}
		}
		d.mu.Unlock()
	}
}

// lagLoop reports the consumer's backlog every lagInterval.
func (d *Dispatcher) lagLoop(ctx context.Context, cons jetstream.Consumer) {
	tick := time.NewTicker(lagInterval)
	defer tick.Stop()
	for {
		info, err := cons.Info(ctx)
		if err == nil {
			d.obs.ConsumerLag(info.NumPending, uint64(info.NumAckPending))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// deadLetterLoop handles the captured max-deliveries advisories: a task whose
// worker died on its last delivery gets a failed result and goes to the
// dead-letter stream.
func (d *Dispatcher) deadLetterLoop(ctx context.Context, cons jetstream.Consumer) {
	for ctx.Err() == nil {
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		batch, err := cons.Fetch(1, jetstream.FetchContext(fctx))
		if err != nil {
			cancel()
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
			continue
		}
		for m := range batch.Messages() {
			d.bury(ctx, m)
		}
		cancel()
		if err := batch.Error(); isConsumerGone(err) {
			if c, cerr := d.conn.DeadLetterAdvisories(ctx); cerr == nil {
				cons = c
			}
		}
	}
}

// isConsumerGone reports a fetch error that recreating the consumer cures.
func isConsumerGone(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, nats.ErrNoResponders)
}

func (d *Dispatcher) bury(ctx context.Context, m jetstream.Msg) {
	adv, err := queue.ParseDeliveryExceeded(m.Data())
	if err != nil {
		d.log.Error("drop undecodable advisory", "err", err)
		_ = m.Term()
		return
	}
	b, err := d.conn.BuryExhausted(ctx, adv)
	if err != nil {
		d.log.Warn("dead-letter exhausted task", "stream_seq", adv.StreamSeq, "err", err)
		_ = m.NakWithDelay(time.Second)
		return
	}
	if b.TaskID != "" {
		d.log.Warn("task dead-lettered: deliveries exhausted", "task_id", b.TaskID, "deliveries", adv.Deliveries)
		d.obs.TaskDeadLettered(ctx, b.TaskID, b.Reason)
		if b.Settled && b.Status.Result != nil {
			d.obs.TaskFinished(ctx, *b.Status.Result, 0)
		}
	}
	_ = m.Ack()
}
