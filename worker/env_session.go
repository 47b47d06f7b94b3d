package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/task"
)

// WithEnv clones t's repository, starts a sandbox on it and calls fn with
// the agent environment inside; the sandbox and the workspace are removed
// when fn returns. `wrench replay` uses it to re-run recorded tool calls.
func (w *Worker) WithEnv(ctx context.Context, t task.Task, fn func(ctx context.Context, env agent.Env) error) error {
	if t.ID == "" {
		t.ID = task.NewID()
	}
	r := &taskRun{w: w, t: t, start: time.Now(), log: w.log}
	ws, err := w.cfg.Workspaces.Open(ctx, t.ID, t.Repo)
	if err != nil {
		return fmt.Errorf("clone %s: %w", t.Repo.URL, err)
	}
	defer ws.Close()
	sb, err := w.cfg.Sandboxes.Start(ctx, r.sandboxSpec(ws.Dir(), r.limits()))
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = sb.Close(cctx)
	}()
	return fn(ctx, sandboxEnv{sb: sb})
}
