package dispatcher

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// Caps are the cluster-wide concurrency limits: how many tasks of a tenant,
// and of a repository, may run at once across every worker sharing the
// queue (0: no limit). *policy.Policy implements it.
type Caps interface {
	TenantLimit(tenant string) int
	RepoLimit(repoURL string) int
}

// Semaphore holds the places under the cluster-wide limits as leases that
// expire unless renewed, so a place held by a worker that died comes back.
// queue.Limits implements it.
type Semaphore interface {
	// Acquire takes one of max places under key for holder for ttl and
	// reports whether it did.
	Acquire(ctx context.Context, key string, max int, holder string, ttl time.Duration) (bool, error)
	// Renew extends holder's lease under key to ttl from now.
	Renew(ctx context.Context, key, holder string, ttl time.Duration) error
	// Release gives holder's place under key back.
	Release(ctx context.Context, key, holder string) error
	// Watch delivers every limit's leases, then each change.
	Watch(ctx context.Context) (<-chan queue.LimitChange, error)
}

// limit is one cluster-wide limit a task falls under.
type limit struct {
	key string
	max int
}

// heldLimits are the places a flight holds, renewed by its heartbeat.
type heldLimits struct {
	limits []limit
	holder string
	// mu orders renewals and the release: no renewal takes a place back
	// after it was given back.
	mu       sync.Mutex
	released bool
}

// limitsOf are the cluster-wide limits t falls under: its tenant's, then
// its repository's.
func (d *Dispatcher) limitsOf(t task.Task) []limit {
	caps := d.cfg.Caps
	if caps == nil {
		return nil
	}
	var out []limit
	if n := caps.TenantLimit(t.TenantName()); n > 0 {
		out = append(out, limit{key: tenantLimitKey(t.TenantName()), max: n})
	}
	if n := caps.RepoLimit(t.Repo.URL); n > 0 {
		out = append(out, limit{key: repoLimitKey(t.Repo.URL), max: n})
	}
	return out
}

func tenantLimitKey(tenant string) string { return "tenant." + tenant }

// repoLimitKey names a repository's limit by a hash of its key (repoKey),
// which keeps URLs out of the bucket's keys.
func repoLimitKey(url string) string {
	sum := sha256.Sum256([]byte(repoKey(url)))
	return "repo." + hex.EncodeToString(sum[:12])
}

// holdCluster waits until t has a place under each cluster-wide limit it
// falls under, and returns the release of those places. While it waits it
// gives up the run slot s and takes one again once it has its places; the
// delivery stays with this worker, heartbeated. Leases last AckWait and
// are renewed by the heartbeat, so the places of a worker that died come
// back within AckWait. The error is ctx's cause.
func (d *Dispatcher) holdCluster(ctx context.Context, f *flight, s *runSlot) (func(), error) {
	limits := d.limitsOf(f.t)
	if len(limits) == 0 {
		return func() {}, nil
	}
	held := &heldLimits{limits: limits, holder: fmt.Sprintf("%s/%s/%d", d.cfg.WorkerID, f.t.ID, f.dl.Message)}
	for waited := false; ; waited = true {
		changed := d.limitChanged()
		ok, err := d.acquireAll(ctx, held)
		if ok {
			if waited {
				f.log().Info("task has its place under the cluster-wide limits", "tenant", f.t.TenantName())
			}
			break
		}
		if err != nil {
			f.log().Warn("take a place under the cluster-wide limits", "err", err)
		} else if !waited {
			f.log().Info("task waits for a place under the cluster-wide limits", "tenant", f.t.TenantName())
		}
		s.release()
		select {
		case <-changed:
		case <-time.After(d.cfg.AckWait / 3): // an expired lease changes no record
		case <-ctx.Done():
			return func() {}, context.Cause(ctx)
		}
	}
	f.limits.Store(held)
	release := sync.OnceFunc(func() {
		f.limits.Store(nil)
		held.mu.Lock()
		defer held.mu.Unlock()
		held.released = true
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
		defer cancel()
		d.releaseAll(rctx, held, len(held.limits))
	})
	if err := s.acquire(ctx); err != nil {
		release()
		return func() {}, err
	}
	return release, nil
}

// acquireAll takes a place under every limit of h, or none.
func (d *Dispatcher) acquireAll(ctx context.Context, h *heldLimits) (bool, error) {
	for i, l := range h.limits {
		opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
		ok, err := d.q.Limits.Acquire(opCtx, l.key, l.max, h.holder, d.cfg.AckWait)
		cancel()
		if !ok || err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
			d.releaseAll(rctx, h, i)
			cancel()
			return false, err
		}
	}
	return true, nil
}

// releaseAll gives back the first n places of h; one that cannot be given
// back expires.
func (d *Dispatcher) releaseAll(ctx context.Context, h *heldLimits, n int) {
	for _, l := range h.limits[:n] {
		if err := d.q.Limits.Release(ctx, l.key, h.holder); err != nil {
			d.log.Warn("give back a place under a cluster-wide limit; it expires", "key", l.key, "err", err)
		}
	}
}

// renewLimits extends the leases of the places f holds (its heartbeat).
func (f *flight) renewLimits(ctx context.Context) {
	h := f.limits.Load()
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return
	}
	for _, l := range h.limits {
		if err := f.d.q.Limits.Renew(ctx, l.key, h.holder, f.d.cfg.AckWait); err != nil {
			f.log().Warn("renew a place under a cluster-wide limit", "key", l.key, "err", err)
		}
	}
}

// limitView is what this dispatcher knows of the places held under each
// limit, from the semaphore's watch: it decides which tenants' tasks to
// fetch, never who gets a place.
type limitView struct {
	mu      sync.Mutex
	expires map[string][]time.Time
	changed chan struct{} // closed and replaced on every change
}

// limitChanged is closed at the next change of any limit.
func (d *Dispatcher) limitChanged() <-chan struct{} {
	d.lim.mu.Lock()
	defer d.lim.mu.Unlock()
	return d.lim.changed
}

// eligible reports whether tenant's tasks may be fetched: it is below its
// cluster-wide limit, as far as this dispatcher knows.
func (d *Dispatcher) eligible(tenant string) bool {
	n := d.cfg.Caps.TenantLimit(tenant)
	if n <= 0 {
		return true
	}
	now := time.Now()
	d.lim.mu.Lock()
	defer d.lim.mu.Unlock()
	live := 0
	for _, exp := range d.lim.expires[tenantLimitKey(tenant)] {
		if exp.After(now) {
			live++
		}
	}
	return live < n
}

// watchLimits keeps the limit view current until ctx is done, watching
// again after a failure.
func (d *Dispatcher) watchLimits(ctx context.Context) {
	for ctx.Err() == nil {
		ch, err := d.q.Limits.Watch(ctx)
		if err != nil {
			d.log.Warn("watch cluster-wide limits", "err", err)
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
			continue
		}
		for c := range ch {
			d.lim.mu.Lock()
			d.lim.expires[c.Key] = c.Expires
			close(d.lim.changed)
			d.lim.changed = make(chan struct{})
			d.lim.mu.Unlock()
		}
	}
}
