package dispatcher

import (
	"context"
	"strings"
	"sync"

	"github.com/wrenchworks/wrench/task"
)

// holdRepo waits until this worker runs fewer than PerRepoLimit tasks of t's
// repository, and returns the release of the place it took. While it waits
// it gives up the run slot s (other repositories' tasks may run in it) and
// takes one again once the repository has room; the delivery stays with
// this worker, heartbeated. The error is ctx's cause.
func (d *Dispatcher) holdRepo(ctx context.Context, t task.Task, s *runSlot) (func(), error) {
	if d.cfg.PerRepoLimit == 0 {
		return func() {}, nil
	}
	key := repoKey(t.Repo.URL)
	for {
		d.mu.Lock()
		if d.repos[key] < d.cfg.PerRepoLimit {
			d.repos[key]++
			d.mu.Unlock()
			break
		}
		ch := d.repoCh
		d.mu.Unlock()
		s.release()
		select {
		case <-ch:
		case <-ctx.Done():
			return func() {}, context.Cause(ctx)
		}
	}
	release := sync.OnceFunc(func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.repos[key]--; d.repos[key] <= 0 {
			delete(d.repos, key)
		}
		close(d.repoCh)
		d.repoCh = make(chan struct{})
	})
	if err := s.acquire(ctx); err != nil {
		release()
		return func() {}, err
	}
	return release, nil
}

// repoKey identifies a repository for the per-repository limit: case,
// surrounding space, a trailing slash or ".git", and the file:// scheme of
// a local path do not make another repository.
func repoKey(url string) string {
	u := strings.ToLower(strings.TrimSpace(url))
	u = strings.TrimPrefix(u, "file://")
	u = strings.TrimSuffix(strings.TrimSuffix(u, "/"), ".git")
	return strings.TrimSuffix(u, "/")
}
