package worker

import (
	"context"
	"io/fs"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/sandbox"
)

// sandboxEnv lets the agent's tools act inside a sandbox: it adapts
// sandbox.Sandbox to agent.Env.
type sandboxEnv struct {
	sb sandbox.Sandbox
}

var _ agent.Env = sandboxEnv{}

func (e sandboxEnv) Exec(ctx context.Context, req agent.ExecRequest) (agent.ExecResult, error) {
	r, err := e.sb.Exec(ctx, sandbox.ExecRequest{
		Command:   req.Command,
		Dir:       req.Dir,
		Timeout:   req.Timeout,
		MaxOutput: req.MaxOutput,
	})
	return agent.ExecResult{
		ExitCode: r.ExitCode,
		Output:   r.Output,
		Dropped:  r.Dropped,
		TimedOut: r.TimedOut,
		Duration: r.Duration,
	}, err
}

func (e sandboxEnv) ReadFile(ctx context.Context, path string) ([]byte, error) {
	return e.sb.ReadFile(ctx, path)
}

func (e sandboxEnv) WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error {
	return e.sb.WriteFile(ctx, path, data, mode)
}

func (e sandboxEnv) Remove(ctx context.Context, path string) error { return e.sb.Remove(ctx, path) }

func (e sandboxEnv) Stat(ctx context.Context, path string) (agent.FileInfo, error) {
	fi, err := e.sb.Stat(ctx, path)
	return agent.FileInfo(fi), err
}

func (e sandboxEnv) ListDir(ctx context.Context, path string) ([]agent.FileInfo, error) {
	list, err := e.sb.ListDir(ctx, path)
	out := make([]agent.FileInfo, len(list))
	for i, fi := range list {
		out[i] = agent.FileInfo(fi)
	}
	return out, err
}

func (e sandboxEnv) Glob(ctx context.Context, pattern, dir string) ([]string, error) {
	return e.sb.Glob(ctx, pattern, dir)
}

func (e sandboxEnv) Grep(ctx context.Context, req agent.GrepRequest) ([]agent.GrepMatch, error) {
	ms, err := e.sb.Grep(ctx, sandbox.GrepRequest(req))
	out := make([]agent.GrepMatch, len(ms))
	for i, m := range ms {
		out[i] = agent.GrepMatch(m)
	}
	return out, err
}
