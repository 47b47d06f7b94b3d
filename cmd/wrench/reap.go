package main

import (
	"context"
	"log/slog"
	"sync"

	"github.com/wrenchworks/wrench/sandbox/docker"
	"github.com/wrenchworks/wrench/sandbox/reaper"
	"github.com/wrenchworks/wrench/workspace"
)

// startReaper removes what crashed or killed processes of this deployment
// left behind (containers of eng and workspaces of wsm whose owner process
// is gone, or whose task is final once hooks know the queue), once now and
// then every minute in the background, until stop is called; stop waits
// for the background sweeps to end. alive, when not nil, says which tasks
// this process is still working on. A failed sweep is logged, not
// returned: the next one retries.
func startReaper(ctx context.Context, eng *docker.Engine, wsm *workspace.Manager, deployment string, alive func(taskID string) bool, hooks *queueLink, log *slog.Logger) (r *reaper.Reaper, stop func()) {
	cfg := reaper.Config{Docker: eng, Deployment: deployment, Alive: alive, Final: hooks.final, Observe: hooks.observe, Logger: log}
	if wsm != nil {
		cfg.Workspaces = wsm
	}
	r, err := reaper.New(cfg)
	if err != nil {
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
