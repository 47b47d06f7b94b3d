package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wrenchworks/wrench/environment"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

// WithEnv prepares t's sandbox as Run would (its repository's environment,
// the tree at its commit) and calls fn with the agent environment inside;
// the sandbox is removed when fn returns. `wrench replay` uses it to re-run
// recorded tool calls.
func (w *Worker) WithEnv(ctx context.Context, t task.Task, fn func(ctx context.Context, env sandbox.Env) error) error {
	if t.ID == "" {
		t.ID = task.NewID()
	}
	r := &taskRun{w: w, t: t, start: time.Now(), log: w.log}
	src, eff, err := r.configure(ctx)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", task.RedactURL(t.Repo.URL), err)
	}
	prep, err := r.prepare(ctx, src, eff)
	src.Close()
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_, _ = prep.Close(cctx)
	}()
	return fn(ctx, prep.Sandbox)
}

// Prebuild makes sure t's environment has a snapshot, running setup when
// it has none, and reports how (`wrench env build`). No agent runs.
func (w *Worker) Prebuild(ctx context.Context, t task.Task, onEvent func(task.Event)) (*task.SetupRun, error) {
	if t.ID == "" {
		t.ID = task.NewID()
	}
	r := &taskRun{w: w, t: t, start: time.Now(), log: w.log, onEvent: onEvent}
	src, eff, err := r.configure(ctx)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	prep, err := r.prepare(ctx, src, eff)
	if err != nil {
		var se *environment.SetupError
		if errors.As(err, &se) {
			return se.Run, err
		}
		return nil, err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_, _ = prep.Close(cctx)
	return prep.Setup, nil
}
