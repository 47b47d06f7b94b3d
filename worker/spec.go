package worker

import (
	"context"
	"errors"
	"time"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

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

// runTests runs the task's test command in the sandbox.
func (r *taskRun) runTests(ctx context.Context, env sandbox.Env, timeout time.Duration) *task.TestRun {
	res, err := env.Exec(ctx, sandbox.ExecRequest{
		Command:   r.t.TestCommand,
		Timeout:   timeout,
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
