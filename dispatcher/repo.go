package dispatcher

import (
	"context"
	"strings"
	"sync"

	"github.com/wrenchworks/wrench/task"
)

// holdRepo waits until this worker runs fewer than PerRepoLimit tasks of t's
// repository, and returns the release of the place it took.
func (d *Dispatcher) holdRepo(ctx context.Context, t task.Task) (func(), error) {
	if d.cfg.PerRepoLimit == 0 {
		return func() {}, nil
	}
	key := repoKey(t.Repo.URL)
	for {
		d.mu.Lock()
		if d.repos[key] < d.cfg.PerRepoLimit {
			d.repos[key]++
			d.mu.Unlock()
			return sync.OnceFunc(func() {
				d.mu.Lock()
				defer d.mu.Unlock()
				if d.repos[key]--; d.repos[key] <= 0 {
					delete(d.repos, key)
				}
				close(d.repoCh)
				d.repoCh = make(chan struct{})
			}), nil
		}
		ch := d.repoCh
		d.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return func() {}, context.Cause(ctx)
		}
	}
}

// repoKey identifies a repository for the per-repository limit.
func repoKey(url string) string {
	u := strings.ToLower(strings.TrimSpace(url))
	u = strings.TrimSuffix(strings.TrimSuffix(u, "/"), ".git")
	return u
}
