package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// LimitsBucket is the KV bucket of the cluster-wide concurrency limits:
// key tenant.<name> or repo.<hash> holds the leases of the runs that hold
// a place under that limit.
const LimitsBucket = "WRENCH_LIMITS"

// Limits is the cluster-wide semaphore role of a [Conn]: places under a
// named limit, held by leases that expire unless renewed, so that a place
// held by a worker that died comes back by itself. Every change is a
// compare-and-set of the limit's one record, so workers sharing a NATS
// never hand out more places than the limit. The bucket is created on
// first use. Expiry times are the holders' clocks: hosts whose clocks
// disagree by a good part of a lease's time to live make leases last
// longer or shorter by as much.
type Limits struct {
	c  *Conn
	mu sync.Mutex
	kv jetstream.KeyValue
}

// leaseRecord is a limit's record: each holder with its lease's expiry
// (Unix milliseconds).
type leaseRecord struct {
	Holders map[string]int64 `json:"holders"`
}

// live is how many leases of r have not expired at now.
func (r leaseRecord) live(now time.Time) int {
	n := 0
	for _, exp := range r.Holders {
		if exp > now.UnixMilli() {
			n++
		}
	}
	return n
}

// prune drops the leases expired at now.
func (r *leaseRecord) prune(now time.Time) {
	for h, exp := range r.Holders {
		if exp <= now.UnixMilli() {
			delete(r.Holders, h)
		}
	}
}

// Limits is the cluster-wide concurrency limits role.
func (c *Conn) Limits() *Limits { return c.limits }

// bucket binds the limits bucket, creating it when missing.
func (l *Limits) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kv != nil {
		return l.kv, nil
	}
	kv, err := l.c.js.KeyValue(ctx, LimitsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = l.c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      LimitsBucket,
			Description: "Wrench cluster-wide concurrency limits: leases of running tasks",
			History:     1,
			Storage:     jetstream.FileStorage,
			Replicas:    l.c.cfg.Replicas,
		})
	}
	if err != nil {
		return nil, fmt.Errorf("bind kv %s: %w", LimitsBucket, err)
	}
	l.kv = kv
	return kv, nil
}

// Acquire takes one of max places under key for holder, leased for ttl,
// and reports whether it did: false when max unexpired leases of others
// hold them all. Expired leases are dropped on the way. A holder that
// already holds a place renews it.
func (l *Limits) Acquire(ctx context.Context, key string, max int, holder string, ttl time.Duration) (bool, error) {
	got := false
	err := l.change(ctx, key, func(r *leaseRecord, now time.Time) bool {
		r.prune(now)
		if _, ok := r.Holders[holder]; !ok && len(r.Holders) >= max {
			got = false
			return false
		}
		r.Holders[holder] = now.Add(ttl).UnixMilli()
		got = true
		return true
	})
	return got, err
}

// Renew extends holder's lease under key to ttl from now. A lease that
// expired meanwhile is taken again, over the limit if need be: the run it
// belongs to goes on either way (its worker was paused past its lease, and
// the task's own lease decides whether it may finish).
func (l *Limits) Renew(ctx context.Context, key, holder string, ttl time.Duration) error {
	return l.change(ctx, key, func(r *leaseRecord, now time.Time) bool {
		r.Holders[holder] = now.Add(ttl).UnixMilli()
		return true
	})
}

// Release gives holder's place under key back.
func (l *Limits) Release(ctx context.Context, key, holder string) error {
	return l.change(ctx, key, func(r *leaseRecord, now time.Time) bool {
		if _, ok := r.Holders[holder]; !ok {
			return false
		}
		delete(r.Holders, holder)
		r.prune(now)
		return true
	})
}

// Held is how many unexpired leases hold a place under key.
func (l *Limits) Held(ctx context.Context, key string) (int, error) {
	kv, err := l.bucket(ctx)
	if err != nil {
		return 0, err
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read limit %s: %w", key, err)
	}
	r, err := decodeLeases(e.Value())
	if err != nil {
		return 0, fmt.Errorf("read limit %s: %w", key, err)
	}
	return r.live(time.Now()), nil
}

// LimitChange is a limit's record as it changed: the expiry of each
// holder's lease.
type LimitChange struct {
	Key     string
	Expires []time.Time
}

// Watch delivers the current record of every limit, then each change,
// until ctx is done.
func (l *Limits) Watch(ctx context.Context) (<-chan LimitChange, error) {
	kv, err := l.bucket(ctx)
	if err != nil {
		return nil, err
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch kv %s: %w", LimitsBucket, err)
	}
	out := make(chan LimitChange)
	go func() {
		defer close(out)
		defer func() { _ = w.Stop() }()
		for e := range w.Updates() {
			if e == nil {
				continue // the end of the current records
			}
			ch := LimitChange{Key: e.Key()}
			if e.Operation() == jetstream.KeyValuePut {
				r, _ := decodeLeases(e.Value())
				for _, exp := range r.Holders {
					ch.Expires = append(ch.Expires, time.UnixMilli(exp))
				}
			}
			select {
			case out <- ch:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// change applies fn to key's record and writes it with compare-and-set,
// retrying on conflicts; fn returns false to write nothing.
func (l *Limits) change(ctx context.Context, key string, fn func(r *leaseRecord, now time.Time) bool) error {
	kv, err := l.bucket(ctx)
	if err != nil {
		return err
	}
	for range casRetries {
		var rev uint64
		r := leaseRecord{Holders: map[string]int64{}}
		e, err := kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return fmt.Errorf("read limit %s: %w", key, err)
		default:
			rev = e.Revision()
			if r, err = decodeLeases(e.Value()); err != nil {
				return fmt.Errorf("read limit %s: %w", key, err)
			}
		}
		if !fn(&r, time.Now()) {
			return nil
		}
		data, _ := json.Marshal(r)
		if rev == 0 {
			_, err = kv.Create(ctx, key, data)
		} else {
			_, err = kv.Update(ctx, key, data, rev)
		}
		if isConflict(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("write limit %s: %w", key, err)
		}
		return nil
	}
	return fmt.Errorf("write limit %s: too many concurrent updates", key)
}

func decodeLeases(b []byte) (leaseRecord, error) {
	r := leaseRecord{Holders: map[string]int64{}}
	if len(b) == 0 {
		return r, nil
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return leaseRecord{Holders: map[string]int64{}}, err
	}
	if r.Holders == nil {
		r.Holders = map[string]int64{}
	}
	return r, nil
}
