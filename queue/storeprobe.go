package queue

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The store probe: [Conn.StoreReady] writes one small record where a
// task's result goes (the state bucket) and one small object where its
// artifacts go (the artifact store), at most once per
// DefaultStoreProbeInterval. A JetStream store that failed a write (a full
// disk) stops acknowledging writes until its server restarts JetStream,
// even after the space is back; the probe is what notices, from any
// process (docs/reliability.md, "Disk full").
const (
	// DefaultStoreProbeInterval is how long a probe's verdict stands.
	DefaultStoreProbeInterval = 5 * time.Second
	// storeProbeTimeout bounds one probe: a store that lost its writes
	// never acknowledges them.
	storeProbeTimeout = 5 * time.Second
	// probeKey and probeObject are what the probe writes: neither names a
	// task (a task id starts with a letter or a digit).
	probeKey    = "probe.store"
	probeObject = "_probe"
)

// storeProbe is the last probe's verdict.
type storeProbe struct {
	mu  sync.Mutex
	at  time.Time
	err error
}

// StoreReady reports whether the store takes writes: nil when the last
// probe, at most DefaultStoreProbeInterval old, wrote both of its records;
// else an error naming what failed. Concurrent callers wait for one probe.
func (c *Conn) StoreReady(ctx context.Context) error {
	p := &c.probe
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.at.IsZero() && time.Since(p.at) < DefaultStoreProbeInterval {
		return p.err
	}
	pctx, cancel := context.WithTimeout(ctx, storeProbeTimeout)
	defer cancel()
	p.err = c.probeStore(pctx)
	p.at = time.Now()
	return p.err
}

// probeStore writes the probe's two records.
func (c *Conn) probeStore(ctx context.Context) error {
	stamp := []byte(time.Now().UTC().Format(time.RFC3339Nano))
	if _, err := c.kv.Put(ctx, probeKey, stamp); err != nil {
		return fmt.Errorf("the store takes no writes: state bucket %s: %w", StateBucket, err)
	}
	if _, err := c.obj.Put(ctx, jetstream.ObjectMeta{Name: probeObject}, bytes.NewReader(stamp)); err != nil {
		return fmt.Errorf("the store takes no writes: artifact store %s: %w", ArtifactsBucket, err)
	}
	return nil
}
