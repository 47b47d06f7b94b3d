package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/task"
)

// ConsumerConfig is the part of the workers' consumers a dispatcher sets.
type ConsumerConfig struct {
	// AckWait is how long a delivery may go without an ack or InProgress
	// before the server redelivers it.
	AckWait time.Duration
	// MaxDeliver is how many times a task is delivered before it is dead.
	MaxDeliver int
	// Eligible, when set, says whether Next may take a task of tenant now
	// (false while the tenant is at its cluster-wide limit): its tasks
	// stay queued for whoever has room, and other tenants' go ahead.
	Eligible func(tenant string) bool
	// Tenants are tenants whose consumers Open makes at once, before any
	// of their tasks is published (the policy's tenants): an autoscaler
	// that reads a tenant's consumer (KEDA's nats-jetstream scaler) finds
	// it from the start instead of "consumer not found".
	Tenants []string
}

// Work is the consuming role of a [Conn]: the durable consumers of the
// work queue, one per tenant, that every dispatcher shares (see
// tenants.go), and the consumer of the server's max-deliveries advisories.
// It is safe for concurrent use.
type Work struct {
	c *Conn

	mu      sync.Mutex
	cc      ConsumerConfig
	set     []tenantQueue     // the default tenant's first, then by name
	served  map[string]uint64 // when each tenant was last served (a count of fetches)
	fetches uint64
	listed  time.Time // when set was last read from the server
	stale   bool      // a task was published for a tenant set lacks
	dead    jetstream.Consumer
	wake    chan string // the tenant of a task just published
	sub     *nats.Subscription
}

// tenantQueue is one tenant's consumer.
type tenantQueue struct {
	tenant string
	cons   jetstream.Consumer
}

// Timing of the tenant consumers.
const (
	// tenantListInterval is how often Next reads which tenants have a
	// consumer, besides when a task of an unknown tenant is published.
	tenantListInterval = 10 * time.Second
	// wakeFetchWait bounds the fetch after a publish woke an idle Next:
	// the publish reaches the subscription about when the stream stores
	// it, and a wake for a task another worker took finds nothing.
	wakeFetchWait = 20 * time.Millisecond
	// idlePoll is how often an idle Next over several consumers looks for
	// redeliveries.
	idlePoll = 500 * time.Millisecond
)

// Open creates or updates every tenant's consumer with cc (the default
// tenant's and cc.Tenants' always), and the advisory consumer, and makes the dead-letter
// stream capture the advisories of every tenant's consumer. Dispatchers
// sharing a stream share these consumers: the last one to call Open sets
// AckWait and MaxDeliver for all.
func (w *Work) Open(ctx context.Context, cc ConsumerConfig) error {
	w.mu.Lock()
	w.cc = cc
	w.mu.Unlock()
	if err := w.c.captureAllAdvisories(ctx); err != nil {
		return err
	}
	for _, t := range cc.Tenants {
		if !task.ValidTenant(t) {
			return fmt.Errorf("consume tasks: tenant %q: not a valid tenant name", t)
		}
		if err := w.c.ensureTenantConsumer(ctx, t); err != nil {
			return err
		}
	}
	if err := w.refresh(ctx, true); err != nil {
		return err
	}
	if _, err := w.deadConsumer(ctx, true); err != nil {
		return err
	}
	return w.subscribe()
}

// config is the consumer configuration of Open, else the default
// consumer's AckWait and MaxDeliver (zero when it does not exist).
func (w *Work) config(ctx context.Context) ConsumerConfig {
	w.mu.Lock()
	cc := w.cc
	w.mu.Unlock()
	if cc.AckWait > 0 {
		return cc
	}
	if cons, err := w.c.tasks.Consumer(ctx, WorkersConsumer); err == nil {
		cfg := cons.CachedInfo().Config
		cc.AckWait, cc.MaxDeliver = cfg.AckWait, cfg.MaxDeliver
	}
	return cc
}

// refresh reads which tenants have a consumer and binds each; with apply,
// or for a tenant it did not know, it creates or updates the consumer with
// Open's configuration. The default tenant's is always there.
func (w *Work) refresh(ctx context.Context, apply bool) error {
	w.mu.Lock()
	cc, known := w.cc, make(map[string]jetstream.Consumer, len(w.set))
	for _, q := range w.set {
		known[q.tenant] = q.cons
	}
	w.mu.Unlock()
	if cc.AckWait <= 0 {
		return errors.New("consume tasks: Work.Open was not called")
	}
	tenants, err := w.c.consumedTenants(ctx)
	if err != nil {
		return err
	}
	set := make([]tenantQueue, 0, len(tenants))
	for _, t := range tenants {
		cons, ok := known[t]
		if apply || !ok {
			var err error
			if cons, err = w.c.tasks.CreateOrUpdateConsumer(ctx, w.c.consumerConfig(ctx, t, cc)); err != nil {
				return fmt.Errorf("create consumer %s: %w", TenantConsumer(t), err)
			}
		}
		set = append(set, tenantQueue{tenant: t, cons: cons})
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.set, w.listed, w.stale = set, time.Now(), false
	return nil
}

// subscribe listens to task publishes (plain NATS, not a consumer): they
// wake an idle Next and name tenants whose consumer it does not know yet.
func (w *Work) subscribe() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sub != nil {
		return nil
	}
	w.wake = make(chan string, 1)
	sub, err := w.c.nc.Subscribe(TaskSubjectPrefix+">", func(m *nats.Msg) {
		tenant, id := parseTaskSubject(m.Subject)
		w.mu.Lock()
		if id == "" || !slices.ContainsFunc(w.set, func(q tenantQueue) bool { return q.tenant == tenant }) {
			w.stale = true // a new tenant, or a message to clear away
		}
		w.mu.Unlock()
		if id == "" {
			return
		}
		select {
		case w.wake <- tenant:
		default:
		}
	})
	if err != nil {
		return fmt.Errorf("subscribe to task publishes: %w", err)
	}
	w.sub = sub
	return nil
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
		FilterSubject: MaxDeliveriesAdvisories,
	})
	if err != nil {
		return nil, fmt.Errorf("create consumer %s: %w", DeadLetterConsumer, err)
	}
	w.dead = cons
	return cons, nil
}

// Next waits up to wait for one delivery and returns it; nil when none
// came. Tenants take turns: it tries each eligible tenant's consumer once,
// starting after the tenant it served last, so that a tenant with a burst
// of tasks never delays another's by more than the tasks already running.
// When none has a task it waits for one: on the only eligible consumer, or
// for a publish to wake it. The wait is not cut short by ctx (a message the
// server sent while a cancelled fetch stopped listening would wait out its
// AckWait): keep wait short. A consumer deleted meanwhile (by an operator,
// or lost with a server) is created again.
func (w *Work) Next(ctx context.Context, wait time.Duration) (*Delivery, error) {
	order, err := w.order(ctx)
	if err != nil {
		return nil, err
	}
	select {
	case <-w.wake: // published before this round, which looks anyway
	default:
	}
	if d, err := w.round(ctx, order); d != nil || err != nil {
		return d, err
	}
	if len(order) == 1 {
		return w.fetch(ctx, order[0], wait)
	}
	// Several consumers: none can be waited on alone. A publish wakes
	// this wait; redeliveries (which publish nothing) are looked for
	// every idlePoll.
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	poll := time.NewTicker(idlePoll)
	defer poll.Stop()
	for {
		select {
		case tenant := <-w.wake:
			for _, q := range order {
				if q.tenant != tenant {
					continue
				}
				if d, err := w.fetch(ctx, q, wakeFetchWait); d != nil || err != nil {
					return d, err
				}
			}
		case <-poll.C:
			if d, err := w.round(ctx, order); d != nil || err != nil {
				return d, err
			}
		case <-deadline.C:
			return nil, nil
		case <-ctx.Done():
			return nil, nil
		}
	}
}

// round tries each consumer of order once, without waiting, and returns
// the first delivery; an error only when none had a task and one failed.
func (w *Work) round(ctx context.Context, order []tenantQueue) (*Delivery, error) {
	var firstErr error
	for _, q := range order {
		d, err := w.fetch(ctx, q, 0)
		if d != nil {
			return d, nil
		}
		firstErr = cmp.Or(firstErr, err)
	}
	return nil, firstErr
}

// order is the eligible tenants' consumers in the order Next tries them,
// after reading the tenants again when that is due.
func (w *Work) order(ctx context.Context) ([]tenantQueue, error) {
	w.mu.Lock()
	due := w.stale || time.Since(w.listed) > tenantListInterval
	opened := len(w.set) > 0
	w.mu.Unlock()
	if !opened {
		return nil, errors.New("consume tasks: Work.Open was not called")
	}
	if due {
		if err := w.refresh(ctx, false); err != nil {
			w.c.log.Warn("read tenant consumers", "err", err)
			w.mu.Lock()
			w.listed = time.Now() // keep the last set; try again later
			w.mu.Unlock()
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]tenantQueue, 0, len(w.set))
	for _, q := range w.set {
		if w.cc.Eligible == nil || w.cc.Eligible(q.tenant) {
			out = append(out, q)
		}
	}
	slices.SortStableFunc(out, func(a, b tenantQueue) int { return cmp.Compare(w.served[a.tenant], w.served[b.tenant]) })
	return out, nil
}

// fetch takes one delivery from q's consumer, waiting up to wait (not at
// all when wait is 0); nil when there was none. The tenant served goes to
// the back of the round.
func (w *Work) fetch(ctx context.Context, q tenantQueue, wait time.Duration) (*Delivery, error) {
	var batch jetstream.MessageBatch
	var err error
	if wait <= 0 {
		batch, err = q.cons.FetchNoWait(1)
	} else {
		batch, err = q.cons.Fetch(1, jetstream.FetchMaxWait(wait))
	}
	if err == nil {
		for m := range batch.Messages() {
			w.markServed(q.tenant)
			return w.delivery(m)
		}
		err = batch.Error()
		if errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) {
			err = nil
		}
	}
	if isConsumerGone(err) {
		cc := w.config(ctx)
		if _, cerr := w.c.tasks.CreateOrUpdateConsumer(ctx, w.c.consumerConfig(ctx, q.tenant, cc)); cerr == nil {
			w.c.log.Warn("workers consumer was missing; recreated", "consumer", TenantConsumer(q.tenant))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("fetch task: %w", err)
	}
	return nil, nil
}

// served puts tenant at the back of the round: Next tries tenants least
// recently served first (one never served, such as a new one, before all).
func (w *Work) markServed(tenant string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.served == nil {
		w.served = map[string]uint64{}
	}
	w.fetches++
	w.served[tenant] = w.fetches
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
		Resumed:   m.Headers().Get(HeaderResumeReason),
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
// delivered and not yet acknowledged (ackPending, i.e. running), summed
// over every tenant's consumer; it reads the consumers without creating or
// changing them. Before any worker created a consumer, every task in the
// stream is pending.
func (w *Work) Lag(ctx context.Context) (pending, ackPending uint64, err error) {
	infos := w.c.tasks.ListConsumers(ctx)
	found := false
	for info := range infos.Info() {
		if _, ok := tenantOfConsumer(info.Name); ok {
			found = true
			pending += info.NumPending
			ackPending += uint64(info.NumAckPending)
		}
	}
	if err := infos.Err(); err != nil {
		return 0, 0, fmt.Errorf("read consumers of %s: %w", TasksStream, err)
	}
	if !found {
		info, err := w.c.tasks.Info(ctx)
		if err != nil {
			return 0, 0, fmt.Errorf("read stream %s: %w", TasksStream, err)
		}
		return info.State.Msgs, 0, nil
	}
	return pending, ackPending, nil
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
	// Resumed is why a paused task was queued again, on the message its
	// resume published ("" on any other): a worker may claim that message
	// before the record says queued with the same reason.
	Resumed string
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

// Subject is the subject the message was published on.
func (d *Delivery) Subject() string { return d.msg.Subject() }

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
	if err := d.c.republish(ctx, d.msg.Subject(), d.TaskID, d.msg.Data(), hdr, d.StreamSeq); err != nil {
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
	// HeaderResumeReason is why a resumed task's message was published
	// ("a budget pause (its budget allows it again)").
	HeaderResumeReason = "Wrench-Resume-Reason"
)

// reissueCounts reads a message's earlier and free delivery counts (zero
// when absent or malformed; free never above earlier).
func reissueCounts(h nats.Header) (earlier, free int) {
	earlier, _ = strconv.Atoi(h.Get(HeaderEarlierDeliveries))
	free, _ = strconv.Atoi(h.Get(HeaderFreeDeliveries))
	earlier = max(earlier, 0)
	return earlier, min(max(free, 0), earlier)
}
