package worker

import (
	"context"
	"errors"
	"time"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

// limits merges the task's limits over the worker's defaults.
func (r *taskRun) limits() task.Limits {
	l, d := r.t.Limits, r.w.cfg.DefaultLimits
	if l.MaxTurns == 0 {
		l.MaxTurns = d.MaxTurns
	}
	if l.MaxCostUSD == 0 {
		l.MaxCostUSD = d.MaxCostUSD
	}
	if l.MaxTokens == 0 {
		l.MaxTokens = d.MaxTokens
	}
	if l.Timeout == 0 {
		l.Timeout = d.Timeout
	}
	return l
}

// agentLimits converts task limits to the agent's. The wall clock is
// enforced by the task context, so the agent gets no timeout of its own.
func agentLimits(l task.Limits) agent.Limits {
	return agent.Limits{
		MaxTurns:    l.MaxTurns,
		MaxCostUSD:  l.MaxCostUSD,
		MaxTokens:   l.MaxTokens,
		HardTurnCap: task.MaxTurnsHardCap,
	}
}

func (r *taskRun) modelSpec() string {
	if r.t.Model != "" {
		return r.t.Model
	}
	return r.w.cfg.DefaultModel
}

// sandboxSpec merges the task's sandbox overrides over the defaults.
func (r *taskRun) sandboxSpec(dir string, l task.Limits) sandbox.Spec {
	d, o := r.w.cfg.Sandbox, r.t.Sandbox
	pick := func(v, def int64) int64 {
		if v != 0 {
			return v
		}
		return def
	}
	cpus := d.CPUs
	if o.CPUs != 0 {
		cpus = o.CPUs
	}
	network := d.Network
	if o.Network != "" {
		network = o.Network
	}
	image := r.t.Image
	if image == "" {
		image = r.w.cfg.DefaultImage
	}
	return sandbox.Spec{
		Image:        image,
		WorkspaceDir: dir,
		TaskID:       r.t.ID,
		Network:      network,
		MemoryBytes:  pick(o.MemoryMB, d.MemoryMB) << 20,
		NanoCPUs:     int64(cpus * 1e9),
		Pids:         pick(o.Pids, d.Pids),
		DiskBytes:    pick(o.DiskMB, d.DiskMB) << 20,
		Timeout:      time.Duration(l.Timeout) + time.Minute,
		Env:          d.Env,
		Runtime:      d.Runtime,
	}
}

// runTests runs the task's test command in the sandbox.
func (r *taskRun) runTests(ctx context.Context, env agent.Env) *task.TestRun {
	res, err := env.Exec(ctx, agent.ExecRequest{
		Command:   r.t.TestCommand,
		Timeout:   r.w.cfg.TestTimeout,
		MaxOutput: 16 << 10,
	})
	tr := &task.TestRun{Command: r.t.TestCommand, ExitCode: res.ExitCode, Duration: res.Duration, Output: string(res.Output)}
	switch {
	case err != nil:
		tr.ExitCode, tr.Output = -1, "could not run the test command: "+err.Error()
	case res.TimedOut:
		tr.Output += "\n[test command timed out]"
	default:
		tr.Passed = res.ExitCode == 0
	}
	if errors.Is(err, context.Canceled) {
		tr.Output = "cancelled"
	}
	return tr
}
