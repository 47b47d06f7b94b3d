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

// Names of the streams, buckets, subjects and consumers Wrench uses. They are
// stable: dashboards, the Helm chart and KEDA's scaler refer to them.
const (
	TasksStream      = "WRENCH_TASKS"
	EventsStream     = "WRENCH_EVENTS"
	DeadLetterStream = "WRENCH_DEADLETTER"
	StateBucket      = "WRENCH_STATE"
	ArtifactsBucket  = "WRENCH_ARTIFACTS"

	// WorkersConsumer is the durable pull consumer on TasksStream that every
	// dispatcher shares.
	WorkersConsumer = "wrench-workers"
	// DeadLetterConsumer is the durable consumer on DeadLetterStream that
	// dispatchers use to process max-deliveries advisories.
	DeadLetterConsumer = "wrench-deadletter"

	// TaskSubjectPrefix + id is where a task is published.
	TaskSubjectPrefix = "wrench.tasks."
	// EventSubjectPrefix + id is where a task's events are published.
	EventSubjectPrefix = "wrench.events."
	// DeadLetterSubjectPrefix + id is where a dead task's message is kept.
	DeadLetterSubjectPrefix = "wrench.deadletter."
	// MaxDeliveriesAdvisory is the subject on which the server announces that
	// a message of the workers consumer ran out of deliveries.
	MaxDeliveriesAdvisory = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + TasksStream + "." + WorkersConsumer
)

// Defaults applied by [Connect] to zero Config fields.
const (
	DefaultDuplicateWindow = 2 * time.Minute
	DefaultEventsMaxAge    = 72 * time.Hour
	DefaultDeadLetterAge   = 30 * 24 * time.Hour
)

// Config says how to reach NATS and how to lay out Wrench's streams.
type Config struct {
	// URL is the NATS server URL (or a comma-separated list for a cluster).
	// With an in-process connect option (see [Embedded.ConnectOption]) it
	// may be empty.
	URL string
	// Name is the client connection name shown by the server ("wrench").
	Name string
	// Replicas for streams, KV and object store (1 when zero).
	Replicas int
	// DuplicateWindow is how long the task stream remembers a Nats-Msg-Id
	// (DefaultDuplicateWindow when zero).
	DuplicateWindow time.Duration
	// EventsMaxAge is how long task events are kept (DefaultEventsMaxAge
	// when zero).
	EventsMaxAge time.Duration
	// Logger receives connection notices; nil discards them.
	Logger *slog.Logger
	// ConnectOptions are passed to nats.Connect after Wrench's own (so they
	// win): credentials, TLS, nats.InProcessServer, ...
	ConnectOptions []nats.Option
	// Propagator, when set, injects the caller's trace context into the
	// headers of published tasks and extracts it on the worker side.
	Propagator propagation.TextMapPropagator
}

// Conn is a connection to NATS with Wrench's streams and buckets bound. It is
// safe for concurrent use. Close it when done.
type Conn struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	tasks  jetstream.Stream
	events jetstream.Stream
	dead   jetstream.Stream
	kv     jetstream.KeyValue
	obj    jetstream.ObjectStore
	cfg    Config
	log    *slog.Logger
}

// Connect dials NATS and creates or updates, idempotently, the task, event
// and dead-letter streams, the state bucket and the artifact store. It
// reconnects forever after a connection loss: calls made while the server
// is away fail with their context or a timeout, and succeed again once it is
// back.
func Connect(ctx context.Context, cfg Config) (*Conn, error) {
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
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
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
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats %s: %w", url, err)
	}
	c, err := bind(ctx, nc, cfg, log)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

func bind(ctx context.Context, nc *nats.Conn, cfg Config, log *slog.Logger) (*Conn, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	c := &Conn{nc: nc, js: js, cfg: cfg, log: log}
	c.tasks, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        TasksStream,
		Description: "Wrench tasks waiting for a worker",
		Subjects:    []string{TaskSubjectPrefix + ">"},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		Duplicates:  cfg.DuplicateWindow,
	})
	if err != nil {
		return nil, fmt.Errorf("create stream %s: %w", TasksStream, err)
	}
	c.events, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        EventsStream,
		Description: "Wrench task events",
		Subjects:    []string{EventSubjectPrefix + ">"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		MaxAge:      cfg.EventsMaxAge,
	})
	if err != nil {
		return nil, fmt.Errorf("create stream %s: %w", EventsStream, err)
	}
	c.dead, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        DeadLetterStream,
		Description: "Wrench tasks whose deliveries ran out, and the advisories that announced them",
		Subjects:    []string{DeadLetterSubjectPrefix + ">", MaxDeliveriesAdvisory},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		MaxAge:      DefaultDeadLetterAge,
		Duplicates:  cfg.DuplicateWindow,
	})
	if err != nil {
		return nil, fmt.Errorf("create stream %s: %w", DeadLetterStream, err)
	}
	c.kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      StateBucket,
		Description: "Wrench task states and results",
		History:     5,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("create kv %s: %w", StateBucket, err)
	}
	c.obj, err = js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      ArtifactsBucket,
		Description: "Wrench task artifacts: patch, trajectory, logs",
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		Compression: true,
	})
	if err != nil {
		return nil, fmt.Errorf("create object store %s: %w", ArtifactsBucket, err)
	}
	return c, nil
}

// Close closes the connection. Pending publishes are abandoned.
func (c *Conn) Close() { c.nc.Close() }

// NATS returns the underlying connection (for health checks and metrics).
func (c *Conn) NATS() *nats.Conn { return c.nc }

// JetStream returns the JetStream handle the Conn uses.
func (c *Conn) JetStream() jetstream.JetStream { return c.js }

// TaskStream returns the bound WRENCH_TASKS stream.
func (c *Conn) TaskStream() jetstream.Stream { return c.tasks }

// DeadLetters returns the bound WRENCH_DEADLETTER stream.
func (c *Conn) DeadLetters() jetstream.Stream { return c.dead }

// Propagator returns the configured trace propagator, or nil.
func (c *Conn) Propagator() propagation.TextMapPropagator { return c.cfg.Propagator }

// Logger returns the Conn's logger (never nil).
func (c *Conn) Logger() *slog.Logger { return c.log }

// ConsumerConfig is the part of the workers consumer a dispatcher sets.
type ConsumerConfig struct {
	// AckWait is how long a delivery may go without an ack or InProgress
	// before the server redelivers it.
	AckWait time.Duration
	// MaxDeliver is how many times a task is delivered before it is dead.
	MaxDeliver int
}

// TaskConsumer creates or updates the durable workers consumer and returns
// it. Dispatchers sharing a stream share this consumer; the last one to call
// TaskConsumer sets AckWait and MaxDeliver for all.
func (c *Conn) TaskConsumer(ctx context.Context, cc ConsumerConfig) (jetstream.Consumer, error) {
	cons, err := c.tasks.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       WorkersConsumer,
		Description:   "Wrench workers",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cc.AckWait,
		MaxDeliver:    cc.MaxDeliver,
		FilterSubject: TaskSubjectPrefix + ">",
		MaxAckPending: -1,
	})
	if err != nil {
		return nil, fmt.Errorf("create consumer %s: %w", WorkersConsumer, err)
	}
	return cons, nil
}

// QueueLag returns how many tasks wait for a worker (pending) and how many
// were delivered and not yet acknowledged (ackPending, i.e. running), as
// the workers consumer counts them; it reads the consumer without creating
// or changing it. Before any worker created the consumer, every task in the
// stream is pending.
func (c *Conn) QueueLag(ctx context.Context) (pending, ackPending uint64, err error) {
	cons, err := c.tasks.Consumer(ctx, WorkersConsumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		info, err := c.tasks.Info(ctx)
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

// DeadLetterAdvisories creates or updates the durable consumer over the
// captured max-deliveries advisories and returns it.
func (c *Conn) DeadLetterAdvisories(ctx context.Context) (jetstream.Consumer, error) {
	cons, err := c.dead.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       DeadLetterConsumer,
		Description:   "Wrench dead-letter handling of max-deliveries advisories",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       time.Minute,
		FilterSubject: MaxDeliveriesAdvisory,
	})
	if err != nil {
		return nil, fmt.Errorf("create consumer %s: %w", DeadLetterConsumer, err)
	}
	return cons, nil
}

// ErrNotFound reports an unknown task id (or artifact name).
var ErrNotFound = errors.New("task not found")

// ErrFinal reports that a task already has a final result.
var ErrFinal = errors.New("task already final")

// ErrLostLease reports that another worker (or a final write) took the task
// over: the caller must stop working on it and must not ack its delivery.
var ErrLostLease = errors.New("task lease lost to another worker")
