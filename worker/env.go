package worker

import (
	"context"
	"errors"
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
	}, envErr(err)
}

func (e sandboxEnv) ReadFile(ctx context.Context, path string) ([]byte, error) {
	b, err := e.sb.ReadFile(ctx, path)
	return b, envErr(err)
}

func (e sandboxEnv) WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error {
	return envErr(e.sb.WriteFile(ctx, path, data, mode))
}

func (e sandboxEnv) Remove(ctx context.Context, path string) error {
	return envErr(e.sb.Remove(ctx, path))
}

func (e sandboxEnv) Stat(ctx context.Context, path string) (agent.FileInfo, error) {
	fi, err := e.sb.Stat(ctx, path)
	return agent.FileInfo(fi), envErr(err)
}

func (e sandboxEnv) ListDir(ctx context.Context, path string) ([]agent.FileInfo, error) {
	list, err := e.sb.ListDir(ctx, path)
	out := make([]agent.FileInfo, len(list))
	for i, fi := range list {
		out[i] = agent.FileInfo(fi)
	}
	return out, envErr(err)
}

func (e sandboxEnv) Glob(ctx context.Context, pattern, dir string) ([]string, error) {
	m, err := e.sb.Glob(ctx, pattern, dir)
	return m, envErr(err)
}

func (e sandboxEnv) Grep(ctx context.Context, req agent.GrepRequest) ([]agent.GrepMatch, error) {
	ms, err := e.sb.Grep(ctx, sandbox.GrepRequest(req))
	out := make([]agent.GrepMatch, len(ms))
	for i, m := range ms {
		out[i] = agent.GrepMatch(m)
	}
	return out, envErr(err)
}

// envErr marks errors that mean the sandbox itself failed (it is gone, hit
// a limit, or the engine is unreachable) so the agent ends the run with
// env_error instead of showing the model a tool error.
func envErr(err error) error {
	switch sandbox.KindOf(err) {
	case sandbox.ErrGone, sandbox.ErrLimit, sandbox.ErrUnavailable:
		return errors.Join(agent.ErrEnvFailed, err)
	}
	return err
}
