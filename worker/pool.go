package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

// SandboxPool hands out sandboxes started ahead of time. Each comes with
// its own empty host directory already mounted at /workspace, which the
// worker then clones the task's repository into.
type SandboxPool interface {
	Acquire(ctx context.Context, spec sandbox.Spec) (Lease, error)
}

// Lease is one sandbox handed out by a SandboxPool.
type Lease interface {
	Sandbox() sandbox.Sandbox
	// Dir is the host directory mounted at /workspace; empty at hand-out.
	Dir() string
	// Release removes the sandbox and its directory.
	Release(ctx context.Context) error
}

// DirWorkspaces opens a workspace whose working tree is a given, empty
// directory (a pooled sandbox's). Workspaces must implement it when the
// worker has a Pool.
type DirWorkspaces interface {
	OpenIn(ctx context.Context, taskID, dir string, repo task.Repo) (Workspace, error)
}

var errPoolNeedsDirWorkspaces = errors.New("worker: a Pool needs Workspaces that implement OpenIn")

// SandboxTemplate is the spec of a task that overrides nothing: what a
// warm pool should start so that its sandboxes match such tasks.
func (w *Worker) SandboxTemplate() sandbox.Spec {
	r := &taskRun{w: w}
	return r.sandboxSpec("", r.limits())
}

// leasedSandbox closes a pooled sandbox by releasing its lease.
type leasedSandbox struct {
	sandbox.Sandbox
	lease Lease
}

func (s leasedSandbox) Close(ctx context.Context) error { return s.lease.Release(ctx) }

// acquireAndClone is the pooled order of the first two phases: take a
// ready sandbox, then clone into its directory.
func (r *taskRun) acquireAndClone(ctx context.Context, pool SandboxPool, limits task.Limits) (Workspace, sandbox.Sandbox, error) {
	var lease Lease
	err := r.phase("sandbox", &r.timings.SandboxStart, func() (err error) {
		lease, err = pool.Acquire(ctx, r.sandboxSpec("", limits))
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("start sandbox: %w", err)
	}
	sb := leasedSandbox{Sandbox: lease.Sandbox(), lease: lease}
	var ws Workspace
	err = r.phase("clone", &r.timings.Clone, func() (err error) {
		ws, err = r.w.cfg.Workspaces.(DirWorkspaces).OpenIn(ctx, r.t.ID, lease.Dir(), r.t.Repo)
		return err
	})
	if err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = sb.Close(cctx)
		return nil, nil, fmt.Errorf("clone: %w", err)
	}
	return ws, sb, nil
}
