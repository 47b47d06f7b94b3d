package main

import (
	"context"
	"log/slog"
	"sync"

	"github.com/docker/docker/client"

	"github.com/wrenchworks/wrench/sandbox/reaper"
	"github.com/wrenchworks/wrench/workspace"
)

// startReaper removes what crashed or killed processes of this deployment
// left behind (containers and workspaces whose owner process is gone),
// once now and then every minute in the background, until stop is called;
// stop waits for the background sweeps to end. alive, when not nil, says
// which tasks this process is still working on. A failed sweep is logged,
// not returned: the next one retries.
func startReaper(ctx context.Context, wsm *workspace.Manager, deployment string, alive func(taskID string) bool, log *slog.Logger) (stop func()) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		log.Warn("reaper disabled: docker client", "err", err)
		return func() {}
	}
	cfg := reaper.Config{Docker: cli, Deployment: deployment, Alive: alive, Logger: log}
	if wsm != nil {
		cfg.Workspaces = wsm
	}
	r, err := reaper.New(cfg)
	if err != nil {
		cli.Close()
		log.Warn("reaper disabled", "err", err)
		return func() {}
	}
	if rep, err := r.Sweep(ctx); err != nil {
		log.Warn("reaper: start-up sweep", "err", err, "containers", len(rep.Containers), "workspaces", len(rep.Workspaces))
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.Run(ctx)
	}()
	return func() {
		cancel()
		wg.Wait()
		cli.Close()
	}
}
