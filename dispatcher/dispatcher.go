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
	q      Queue
	runner Runner
	cfg    Config
	log    *slog.Logger
	obs    Observer
	health health

	started  atomic.Bool
	slots    chan struct{} // one per running task
	busyMu   sync.Mutex    // orders the busy count's reports
	busy     int           // slots held by a delivery (not by a fetch that waits)
	inbox    chan struct{} // one per delivery held: running or waiting
	handlers sync.WaitGroup

	mu      sync.Mutex
	running map[*flight]struct{}
	repos   map[string]int
	repoCh  chan struct{} // closed and replaced when a repo slot frees

	lim limitView
}

// New returns a dispatcher that runs tasks from q with runner. It does
// nothing until [Dispatcher.Run].
func New(q Queue, runner Runner, cfg Config) (*Dispatcher, error) {
	if !q.complete() || runner == nil {
		return nil, errors.New("dispatcher: every role of the queue and a runner are required")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.Caps != nil && q.Limits == nil {
		return nil, errors.New("dispatcher: Config.Caps needs the queue's Limits")
	}
	if p, ok := runner.(Prober); ok && cfg.Probe == nil {
		cfg.Probe = p.Probe
	}
	d := &Dispatcher{
		q:       q,
		runner:  runner,
		cfg:     cfg,
		log:     cfg.Logger.With("worker", cfg.WorkerID),
		obs:     cfg.Observer,
		slots:   make(chan struct{}, cfg.Slots),
		inbox:   make(chan struct{}, 2*cfg.Slots),
		running: make(map[*flight]struct{}),
		repos:   make(map[string]int),
		repoCh:  make(chan struct{}),
		lim:     limitView{expires: map[string][]time.Time{}, changed: make(chan struct{})},
	}
	d.health.fault, d.health.back = errNotStarted, make(chan struct{})
	return d, nil
}

// OpenQueue creates (or updates) the consumer every dispatcher shares, with
// cfg's AckWait and MaxDeliver (defaults applied as [New] does), without
// running anything. A process that serves the API but runs no tasks calls
// it, so that the consumer exists before any worker starts: an autoscaler
// that reads the consumer's lag (KEDA's nats-jetstream scaler) can then
// scale workers up from zero.
func OpenQueue(ctx context.Context, w Work, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	if err := w.Open(ctx, queue.ConsumerConfig{AckWait: cfg.AckWait, MaxDeliver: cfg.MaxDeliver, Tenants: cfg.Tenants}); err != nil {
		return fmt.Errorf("dispatcher: %w", err)
	}
	return nil
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
	cc := queue.ConsumerConfig{AckWait: d.cfg.AckWait, MaxDeliver: d.cfg.MaxDeliver, Tenants: d.cfg.Tenants}
	if d.cfg.Caps != nil {
		cc.Eligible = d.eligible
	}
	err := d.q.Work.Open(ctx, cc)
	if err == nil {
		return d.run(ctx)
	}
	if ctx.Err() != nil {
		return nil // stopped before it started
	}
	return fmt.Errorf("dispatcher: %w", err)
}

func (d *Dispatcher) run(ctx context.Context) error {
	// Background helpers and runs outlive ctx: they stop on their own
	// schedule during shutdown.
	bg, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	runBase, stopRuns := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopRuns(errShutdown)
	cancels, err := d.q.States.WatchCancels(bg)
	if err != nil {
		stopBg()
		return fmt.Errorf("dispatcher: %w", err)
	}
	var bgWG sync.WaitGroup
	bgWG.Go(func() { d.routeCancels(cancels) })
	bgWG.Go(func() { d.deadLetterLoop(bg) })
	bgWG.Go(func() { d.lagLoop(bg) })
	if d.cfg.Caps != nil {
		bgWG.Go(func() { d.watchLimits(bg) })
	}
	d.start(ctx)
	bgWG.Go(func() { d.healthLoop(bg) })

	d.log.Info("dispatcher started", "slots", d.cfg.Slots, "ack_wait", d.cfg.AckWait, "max_deliver", d.cfg.MaxDeliver)
	d.obs.Slots(0, d.cfg.Slots)
	d.fetchLoop(ctx, runBase)

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

// fetchLoop pulls one task per free slot until ctx is done, while the
// dispatcher is ready (see health.go). A fetch also needs room in the
// inbox, which bounds the deliveries this worker holds (2 x Slots): those
// running, and those waiting without a slot for their repository's turn
// (see holdRepo).
func (d *Dispatcher) fetchLoop(ctx context.Context, runBase context.Context) {
	failures := 0
	for {
		select {
		case d.inbox <- struct{}{}:
		case <-ctx.Done():
			return
		}
		s := &runSlot{d: d}
		// Ready is checked last: a run that ends on a fault of this
		// worker's infrastructure frees its slot after marking it unready.
		if s.acquire(ctx) != nil || d.waitReady(ctx) != nil {
			s.release()
			<-d.inbox
			return
		}
		msg, err := d.q.Work.Next(ctx, d.cfg.FetchWait)
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
		s.work()
		if ctx.Err() != nil {
			// Fetched while stopping: hand it straight back.
			_ = msg.Nak(0)
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
// goroutine at a time. A slot is taken before the fetch, so a task never
// arrives without room to run; it counts as busy (the free-slots metric)
// only once it holds a delivery, so an idle worker reports every slot free.
type runSlot struct {
	d       *Dispatcher
	held    bool
	working bool // a delivery is attached: a held slot is busy
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
	if s.working {
		s.d.reportSlots(1)
	}
	return nil
}

// work attaches the delivery just fetched to the slot: it is busy now.
func (s *runSlot) work() {
	s.working = true
	if s.held {
		s.d.reportSlots(1)
	}
}

// release frees the slot, if this claim holds one.
func (s *runSlot) release() {
	if !s.held {
		return
	}
	<-s.d.slots
	s.held = false
	if s.working {
		s.d.reportSlots(-1)
	}
}

// reportSlots changes the busy count by delta and tells the observer, in
// the order the changes happen.
func (d *Dispatcher) reportSlots(delta int) {
	d.busyMu.Lock()
	defer d.busyMu.Unlock()
	d.busy += delta
	d.obs.Slots(d.busy, d.cfg.Slots)
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
func (d *Dispatcher) lagLoop(ctx context.Context) {
	tick := time.NewTicker(lagInterval)
	defer tick.Stop()
	for {
		if pending, ackPending, err := d.q.Work.Lag(ctx); err == nil {
			d.obs.ConsumerLag(pending, ackPending)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// buryWait is how long one look for an exhausted task waits.
const buryWait = 5 * time.Second

// deadLetterLoop handles tasks whose worker died on their last delivery:
// each gets a failed result and goes to the dead-letter stream.
func (d *Dispatcher) deadLetterLoop(ctx context.Context) {
	for ctx.Err() == nil {
		b, err := d.q.Work.BuryExhausted(ctx, buryWait)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Debug("dead-letter exhausted task", "err", err)
			}
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
			continue
		}
		if b.TaskID == "" {
			continue
		}
		tctx := ctx // the task's trace, for its log lines
		if b.Trace != nil {
			tctx = b.Trace(ctx)
		}
		log := logctx.Bind(tctx, d.log.With("task_id", b.TaskID))
		log.Warn("task dead-lettered: deliveries exhausted", "reason", b.Reason)
		d.obs.TaskDeadLettered(tctx, b.TaskID, b.Reason)
		if b.Settled && b.Status.Result != nil {
			d.obs.TaskFinished(ctx, *b.Status.Result, 0)
		}
		fctx, cancel := context.WithTimeout(context.WithoutCancel(tctx), finishTimeout)
		if err := d.finalizeStatus(fctx, b.Status); err != nil {
			log.Error("finalize dead-lettered task", "err", err)
		}
		cancel()
	}
}
