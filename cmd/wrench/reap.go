package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/docker/docker/client"

	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/sandbox/reaper"
	"github.com/wrenchworks/wrench/telemetry"
	"github.com/wrenchworks/wrench/workspace"
)

// startReaper removes what crashed or killed processes of this deployment
// left behind (containers and workspaces whose owner process is gone, or
// whose task is final once hooks know the queue), once now and then every
// minute in the background, until stop is called; stop waits for the
// background sweeps to end. alive, when not nil, says which tasks this
// process is still working on. A failed sweep is logged, not returned: the
// next one retries. r is nil when there is no engine client.
func startReaper(ctx context.Context, wsm *workspace.Manager, deployment string, alive func(taskID string) bool, hooks *reapHooks, log *slog.Logger) (r *reaper.Reaper, stop func()) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		log.Warn("reaper disabled: docker client", "err", err)
		return nil, func() {}
	}
	cfg := reaper.Config{Docker: cli, Deployment: deployment, Alive: alive, Final: hooks.final, Observe: hooks.observe, Logger: log}
	if wsm != nil {
		cfg.Workspaces = wsm
	}
	r, err = reaper.New(cfg)
	if err != nil {
		cli.Close()
		log.Warn("reaper disabled", "err", err)
		return nil, func() {}
	}
	hooks.setReaper(r)
	if rep, err := r.Sweep(ctx); err != nil {
		log.Warn("reaper: start-up sweep", "err", err, "containers", len(rep.Containers), "workspaces", len(rep.Workspaces))
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { r.Run(ctx) })
	return r, func() {
		cancel()
		wg.Wait()
		cli.Close()
	}
}

// reapHooks are what the reaper learns once serve or worker has its queue
// and metrics: which tasks are final (their containers go on sight) and
// where removals are counted (wrench_orphans_reaped_total). Until then,
// and in `wrench run`, they tell nothing. The zero value is ready to use;
// a nil one tells nothing.
type reapHooks struct {
	mu      sync.Mutex
	states  *queue.States
	metrics *telemetry.Metrics
	reaper  *reaper.Reaper
}

func (h *reapHooks) setReaper(r *reaper.Reaper) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.reaper = r
	h.mu.Unlock()
}

// connect gives the hooks the queue's states and the metrics, then sweeps
// once with them.
func (h *reapHooks) connect(ctx context.Context, states *queue.States, m *telemetry.Metrics, log *slog.Logger) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.states, h.metrics = states, m
	r := h.reaper
	h.mu.Unlock()
	if r == nil {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := r.Sweep(sctx); err != nil {
		log.Warn("reaper: sweep", "err", err)
	}
}

// final reports whether task id's state is final.
func (h *reapHooks) final(ctx context.Context, id string) (bool, error) {
	if h == nil {
		return false, nil
	}
	h.mu.Lock()
	s := h.states
	h.mu.Unlock()
	if s == nil {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := s.Status(ctx, id)
	if err != nil {
		return false, err
	}
	return st.State.Final(), nil
}

// observe counts a removal.
func (h *reapHooks) observe(r reaper.Removed) {
	if h == nil {
		return
	}
	h.mu.Lock()
	m := h.metrics
	h.mu.Unlock()
	if m != nil {
		m.OrphanReaped(r.Kind, r.Cause)
	}
}

// reclaim removes what earlier attempts of a task left (worker.Config.Reclaim).
func reclaim(r *reaper.Reaper) func(context.Context, string) (int, error) {
	if r == nil {
		return nil
	}
	return func(ctx context.Context, id string) (int, error) {
		rep, err := r.RemoveTask(ctx, id)
		return len(rep.Containers) + len(rep.Workspaces), err
	}
}
