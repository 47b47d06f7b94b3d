package shim_test

import (
	"context"
	"testing"

	"github.com/wrenchworks/wrench/internal/sandboxtest"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/shim"
)

// clientEnv is a shim client as a sandbox.Env: commands get the server's
// base environment only.
type clientEnv struct{ *shim.Client }

func (c clientEnv) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	return c.Client.Exec(ctx, req, nil)
}

// TestContract runs the shim in process, with the test's temporary
// directory as its workspace; sandbox/docker runs the same suite through a
// container.
func TestContract(t *testing.T) {
	sandboxtest.Run(t, func(t *testing.T, files map[string]string) (sandbox.Env, string) {
		dir := t.TempDir()
		sandboxtest.WriteTree(t, dir, files)
		return clientEnv{startShim(t, dir, shim.Options{})}, dir
	})
}
