package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Names of the streams, buckets, subjects and consumers Wrench uses. They are
// stable: dashboards, the Helm chart and KEDA's scaler refer to them.
const (
	TasksStream      = "WRENCH_TASKS"
	EventsStream     = "WRENCH_EVENTS"
	DeadLetterStream = "WRENCH_DEADLETTER"
	StateBucket      = "WRENCH_STATE"
	ArtifactsBucket  = "WRENCH_ARTIFACTS"
	// BudgetBucket is the daily spend ledger of repositories and tenants.
	BudgetBucket = "WRENCH_BUDGET"

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
	// MaxDeliveriesAdvisories are the max-deliveries advisories of every
	// tenant's consumer (see [TenantConsumer]), which the dead-letter
	// stream captures.
	MaxDeliveriesAdvisories = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + TasksStream + ".*"
)

// Defaults applied by [Connect] to zero Config fields.
const (
	DefaultDuplicateWindow = 2 * time.Minute
	DefaultEventsMaxAge    = 72 * time.Hour
	DefaultDeadLetterAge   = 30 * 24 * time.Hour

	DefaultStateMaxAge       = 30 * 24 * time.Hour
	DefaultStateMaxBytes     = 1 << 30
	DefaultArtifactsMaxAge   = 30 * 24 * time.Hour
	DefaultArtifactsMaxBytes = 8 << 30
)

// Retention bounds what the state bucket and the artifact store keep. A
// zero field takes its default; a negative one means no limit.
//
// Ages count from a record's last write: a final task's state and its
// artifacts go MaxAge after it finished (a queued task whose record aged
// out gets it back from its message when a worker takes it). Past MaxBytes
// the oldest records are dropped first, so a full store keeps taking new
// tasks and results.
type Retention struct {
	StateMaxAge       time.Duration
	StateMaxBytes     int64
	ArtifactsMaxAge   time.Duration
	ArtifactsMaxBytes int64
}

func (r Retention) withDefaults() Retention {
	age := func(v *time.Duration, def time.Duration) {
		switch {
		case *v == 0:
			*v = def
		case *v < 0:
			*v = 0 // JetStream: no age limit
		}
	}
	size := func(v *int64, def int64) {
		switch {
		case *v == 0:
			*v = def
		case *v < 0:
			*v = -1 // JetStream: no size limit
		}
	}
	age(&r.StateMaxAge, DefaultStateMaxAge)
	age(&r.ArtifactsMaxAge, DefaultArtifactsMaxAge)
	size(&r.StateMaxBytes, DefaultStateMaxBytes)
	size(&r.ArtifactsMaxBytes, DefaultArtifactsMaxBytes)
	return r
}

// layout binds every stream and bucket: created or updated to match the
// Config with ApplyLayout, else created only when missing.
func (c *Conn) layout(ctx context.Context) error {
	cfg := c.cfg
	var err error
	if c.tasks, err = c.stream(ctx, jetstream.StreamConfig{
		Name:        TasksStream,
		Description: "Wrench tasks waiting for a worker",
		Subjects:    []string{TaskSubjectPrefix + ">"},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		Duplicates:  cfg.DuplicateWindow,
	}); err != nil {
		return err
	}
	if c.events, err = c.stream(ctx, jetstream.StreamConfig{
		Name:        EventsStream,
		Description: "Wrench task events",
		Subjects:    []string{EventSubjectPrefix + ">"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		MaxAge:      cfg.EventsMaxAge,
		Duplicates:  min(cfg.DuplicateWindow, cfg.EventsMaxAge),
	}); err != nil {
		return err
	}
	if c.dead, err = c.stream(ctx, jetstream.StreamConfig{
		Name:        DeadLetterStream,
		Description: "Wrench tasks whose deliveries ran out, and the advisories that announced them",
		Subjects:    []string{DeadLetterSubjectPrefix + ">", MaxDeliveriesAdvisories},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		MaxAge:      DefaultDeadLetterAge,
		Duplicates:  cfg.DuplicateWindow,
	}); err != nil {
		return err
	}
	if c.kv, err = c.stateBucket(ctx); err != nil {
		return err
	}
	if c.budget, err = c.budgetBucket(ctx); err != nil {
		return err
	}
	c.obj, err = c.artifactStore(ctx)
	return err
}

// stream binds stream sc.Name.
func (c *Conn) stream(ctx context.Context, sc jetstream.StreamConfig) (jetstream.Stream, error) {
	var s jetstream.Stream
	var err error
	if c.cfg.ApplyLayout {
		s, err = c.js.CreateOrUpdateStream(ctx, sc)
	} else if s, err = c.js.Stream(ctx, sc.Name); errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = c.js.CreateStream(ctx, sc)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			s, err = c.js.Stream(ctx, sc.Name) // created meanwhile
		}
	}
	if err != nil {
		return nil, fmt.Errorf("bind stream %s: %w", sc.Name, err)
	}
	return s, nil
}

func (c *Conn) stateBucket(ctx context.Context) (jetstream.KeyValue, error) {
	ret := c.cfg.Retention
	kc := jetstream.KeyValueConfig{
		Bucket:      StateBucket,
		Description: "Wrench task states and results",
		History:     5,
		Storage:     jetstream.FileStorage,
		Replicas:    c.cfg.Replicas,
		TTL:         ret.StateMaxAge,
		MaxBytes:    ret.StateMaxBytes,
	}
	kv, err := c.js.KeyValue(ctx, StateBucket)
	if c.cfg.ApplyLayout || errors.Is(err, jetstream.ErrBucketNotFound) {
		if kv, err = c.js.CreateOrUpdateKeyValue(ctx, kc); err == nil {
			err = c.amend(ctx, "KV_"+StateBucket, discardOld)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("bind kv %s: %w", StateBucket, err)
	}
	return kv, nil
}

func (c *Conn) artifactStore(ctx context.Context) (jetstream.ObjectStore, error) {
	ret := c.cfg.Retention
	oc := jetstream.ObjectStoreConfig{
		Bucket:      ArtifactsBucket,
		Description: "Wrench task artifacts: patch, trajectory, logs",
		Storage:     jetstream.FileStorage,
		Replicas:    c.cfg.Replicas,
		TTL:         ret.ArtifactsMaxAge,
		MaxBytes:    ret.ArtifactsMaxBytes,
	}
	if err := c.warnCompressed(ctx); err != nil {
		return nil, fmt.Errorf("bind object store %s: %w", ArtifactsBucket, err)
	}
	obj, err := c.js.ObjectStore(ctx, ArtifactsBucket)
	if c.cfg.ApplyLayout || errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		obj, err = c.js.CreateOrUpdateObjectStore(ctx, oc)
	}
	if err == nil {
		// Every connection, not only the layout's owner: a store that an
		// older version created compressed is the one to fix.
		err = c.amend(ctx, "OBJ_"+ArtifactsBucket, discardOld, uncompressed)
	}
	if err != nil {
		return nil, fmt.Errorf("bind object store %s: %w", ArtifactsBucket, err)
	}
	return obj, nil
}

// warnCompressed tells the operator, when the artifact store is still
// compressed, what its change to uncompressed (by [uncompressed]) leaves
// to do: a running server goes on compressing until it restarts.
func (c *Conn) warnCompressed(ctx context.Context) error {
	s, err := c.js.Stream(ctx, "OBJ_"+ArtifactsBucket)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("read stream OBJ_%s: %w", ArtifactsBucket, err)
	}
	if s.CachedInfo().Config.Compression != jetstream.NoCompression {
		c.log.Warn("the artifact store is compressed, which a NATS cluster node SIGKILLed can come back unable to read; "+
			"turning compression off. Each NATS server compresses until it restarts: restart them, one at a time, with SIGTERM",
			"stream", "OBJ_"+ArtifactsBucket, "docs", "docs/reliability.md#chaos")
	}
	return nil
}

// A streamFix changes what it fixes in sc and reports whether it changed
// anything.
type streamFix func(sc *jetstream.StreamConfig) bool

// discardOld sets the discard policy of a bucket's stream to DiscardOld:
// buckets refuse writes once full (DiscardNew), Wrench's stores drop their
// oldest records instead, so that a full store keeps working.
func discardOld(sc *jetstream.StreamConfig) bool {
	if sc.Discard == jetstream.DiscardOld {
		return false
	}
	sc.Discard = jetstream.DiscardOld
	return true
}

// uncompressed turns off the S2 compression that versions before
// 2026-11-28 gave the artifact store. A cluster node restarted after a
// SIGKILL truncates each replicated stream to its last snapshot and
// replays its Raft log; nats-server 2.15 cut a block it had compressed
// before the restart as if it were plain, and failed with "s2: corrupt
// input" (docs/reliability.md, Chaos; TestClusterArtifactsSurviveKill).
// A server applies the change when it next loads the stream (restarts);
// blocks already compressed stay so, readable, until they age out.
func uncompressed(sc *jetstream.StreamConfig) bool {
	if sc.Compression == jetstream.NoCompression {
		return false
	}
	sc.Compression = jetstream.NoCompression
	return true
}

// amend applies fixes to the config of stream name and updates the stream
// when any of them changed it.
func (c *Conn) amend(ctx context.Context, name string, fixes ...streamFix) error {
	s, err := c.js.Stream(ctx, name)
	if err != nil {
		return fmt.Errorf("read stream %s: %w", name, err)
	}
	sc := s.CachedInfo().Config
	changed := false
	for _, fix := range fixes {
		changed = fix(&sc) || changed
	}
	if !changed {
		return nil
	}
	if _, err := c.js.UpdateStream(ctx, sc); err != nil {
		return fmt.Errorf("update stream %s: %w", name, err)
	}
	return nil
}

// captureAllAdvisories makes the dead-letter stream capture the
// max-deliveries advisories of every tenant's consumer: a stream laid out
// before tenants captured only the default consumer's.
func (c *Conn) captureAllAdvisories(ctx context.Context) error {
	info, err := c.dead.Info(ctx)
	if err != nil {
		return fmt.Errorf("read stream %s: %w", DeadLetterStream, err)
	}
	sc := info.Config
	if slices.Contains(sc.Subjects, MaxDeliveriesAdvisories) {
		return nil
	}
	sc.Subjects = slices.DeleteFunc(sc.Subjects, func(s string) bool { return s == MaxDeliveriesAdvisory })
	sc.Subjects = append(sc.Subjects, MaxDeliveriesAdvisories)
	if _, err := c.js.UpdateStream(ctx, sc); err != nil {
		return fmt.Errorf("capture every tenant's advisories in %s: %w", DeadLetterStream, err)
	}
	return nil
}
