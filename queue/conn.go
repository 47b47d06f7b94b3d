package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/propagation"
)

// Config says how to reach NATS and how to lay out Wrench's streams.
type Config struct {
	// URL is the NATS server URL (or a comma-separated list for a cluster).
	// With an in-process connect option (natsserver.Server.ConnectOption)
	// it may be empty.
	URL string
	// Name is the client connection name shown by the server ("wrench").
	Name string
	// Replicas of every stream, the state bucket and the artifact store
	// (1 when zero). A cluster of three servers takes 3.
	Replicas int
	// DuplicateWindow is how long the task, event and dead-letter streams
	// remember a Nats-Msg-Id (DefaultDuplicateWindow when zero; the event
	// stream's is at most EventsMaxAge).
	DuplicateWindow time.Duration
	// EventsMaxAge is how long task events are kept (DefaultEventsMaxAge
	// when zero).
	EventsMaxAge time.Duration
	// Retention bounds the state bucket and the artifact store.
	Retention Retention
	// BudgetHoldTTL is how long the budget ledger holds a model call's
	// reservation before it counts as spent (DefaultBudgetHoldTTL when
	// zero).
	BudgetHoldTTL time.Duration
	// ApplyLayout makes Connect create or update every stream and bucket
	// to match this Config (`wrench serve` does: it owns the layout).
	// Without it Connect creates only what is missing and leaves existing
	// streams and buckets as they are, so that a worker started with other
	// flags does not change them. Any connection fixes what no version may
	// keep: an artifact store that is compressed or refuses writes when
	// full.
	ApplyLayout bool
	// BindRetry is how long Connect waits between attempts to bind the
	// streams and buckets while JetStream is not ready (DefaultBindRetryMin
	// doubling up to DefaultBindRetryMax for zero fields).
	BindRetry Backoff
	// Logger receives connection notices; nil discards them.
	Logger *slog.Logger
	// ConnectOptions are passed to nats.Connect after Wrench's own (so they
	// win): credentials, TLS, nats.InProcessServer, ...
	ConnectOptions []nats.Option
	// Propagator, when set, injects the caller's trace context into the
	// headers of published tasks and extracts it on the worker side.
	Propagator propagation.TextMapPropagator
}

// Conn is a connection to NATS with Wrench's streams and buckets bound. It
// is safe for concurrent use. Its roles are handed out separately, each
// with the few methods its users need: [Conn.Submissions] (submitting and
// cancelling), [Conn.Work] (consuming deliveries), [Conn.States] (the state
// machine), [Conn.Artifacts] and [Conn.Events]. Close it when done.
type Conn struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	tasks  jetstream.Stream
	events jetstream.Stream
	dead   jetstream.Stream
	kv     jetstream.KeyValue
	budget jetstream.KeyValue
	obj    jetstream.ObjectStore
	cfg    Config
	log    *slog.Logger

	submissions *Submissions
	states      *States
	work        *Work
	artifacts   *Artifacts
	evs         *Events
	effects     *Effects
	budgets     *Budgets
	limits      *Limits
	tenantCons  tenantConsumers

	probe storeProbe // StoreReady's last verdict
}

// Connect dials NATS and creates or updates, idempotently, the task, event
// and dead-letter streams, the state bucket and the artifact store. While
// no server answers (a worker started before its NATS), and while
// JetStream is not ready (starting, or its cluster electing a leader after
// a node restarted) it logs a warning and tries again, with backoff
// (Config.BindRetry), until ctx ends; an error that waiting cannot mend
// (configuration, permissions) is returned at once. It reconnects forever
// after a connection loss: calls made while the server is away fail with
// their context or a timeout, and succeed again once it is back.
func Connect(ctx context.Context, cfg Config) (*Conn, error) {
	cfg = cfg.withDefaults()
	log := cfg.Logger
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted())
		}),
	}
	opts = append(opts, cfg.ConnectOptions...)
	url := cfg.URL
	if url == "" {
		url = nats.DefaultURL
	}
	nc, err := dial(ctx, url, opts, cfg)
	if err != nil {
		return nil, err
	}
	c, err := bindWhenReady(ctx, nc, cfg)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

func (cfg Config) withDefaults() Config {
	if cfg.Name == "" {
		cfg.Name = "wrench"
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	if cfg.DuplicateWindow <= 0 {
		cfg.DuplicateWindow = DefaultDuplicateWindow
	}
	if cfg.EventsMaxAge <= 0 {
		cfg.EventsMaxAge = DefaultEventsMaxAge
	}
	cfg.Retention = cfg.Retention.withDefaults()
	cfg.BindRetry = cfg.BindRetry.withDefaults()
	if cfg.BudgetHoldTTL <= 0 {
		cfg.BudgetHoldTTL = DefaultBudgetHoldTTL
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

func bind(ctx context.Context, nc *nats.Conn, cfg Config) (*Conn, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	c := &Conn{nc: nc, js: js, cfg: cfg, log: cfg.Logger}
	if err := c.layout(ctx); err != nil {
		return nil, err
	}
	c.submissions = &Submissions{c: c}
	c.states = &States{c: c}
	c.work = &Work{c: c}
	c.artifacts = &Artifacts{c: c}
	c.evs = &Events{c: c}
	c.effects = &Effects{c: c}
	c.budgets = &Budgets{c: c}
	c.limits = &Limits{c: c}
	return c, nil
}

// Submissions is the submitting role: queue a task, cancel one.
func (c *Conn) Submissions() *Submissions { return c.submissions }

// States is the state-machine role: read states, claim a task for a run,
// settle it, watch cancellation requests.
func (c *Conn) States() *States { return c.states }

// Work is the consuming role: deliveries of the work queue, its lag, and
// the tasks whose deliveries ran out.
func (c *Conn) Work() *Work { return c.work }

// Artifacts is the artifact store: patch, trajectory, logs of each task.
func (c *Conn) Artifacts() *Artifacts { return c.artifacts }

// Events is the event stream of each task.
func (c *Conn) Events() *Events { return c.evs }

// Budgets returns the budget-ledger role.
func (c *Conn) Budgets() *Budgets { return c.budgets }

// Ready reports whether the connection is up: nil when connected, else an
// error naming its state.
func (c *Conn) Ready() error {
	if s := c.nc.Status(); s != nats.CONNECTED {
		return fmt.Errorf("nats connection is %s", s)
	}
	return nil
}

// URL is the URL of the server the connection is on, without credentials
// ("" while disconnected).
func (c *Conn) URL() string { return c.nc.ConnectedUrlRedacted() }

// closeFlush bounds how long Close waits for what was sent last.
const closeFlush = 5 * time.Second

// Close flushes what was sent last (a Nak that hands a task back at
// shutdown is fire-and-forget: without the flush it would wait out its
// AckWait) when connected, and closes the connection.
func (c *Conn) Close() {
	if c.nc.Status() == nats.CONNECTED {
		if err := c.nc.FlushTimeout(closeFlush); err != nil {
			c.log.Warn("flush nats before close", "err", err)
		}
	}
	c.nc.Close()
}

// ErrFinal reports that a task already has a final result.
var ErrFinal = errors.New("task already final")

// ErrDuplicate reports a delivery of another message of a task that a live
// worker is running: the duplicate is ended without running; the holder's
// own message stays queued until it finishes, so nothing is lost if it dies.
var ErrDuplicate = errors.New("task is running from another message")

// ErrLostLease reports that another worker (or a final write) took the task
// over: the caller must stop working on it and must not ack its delivery.
var ErrLostLease = errors.New("task lease lost to another worker")
