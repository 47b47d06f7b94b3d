package docker_test

import (
	"testing"

	"github.com/wrenchworks/wrench/internal/sandboxtest"
	"github.com/wrenchworks/wrench/sandbox"
)

// TestContract holds the Docker sandbox to the contract every sandbox.Env
// passes (the in-memory fake agent/memenv runs the same suite), through a
// real container on the real engine.
func TestContract(t *testing.T) {
	f := newFixture(t, nil)
	sandboxtest.Run(t, func(t *testing.T, files map[string]string) (sandbox.Env, string) {
		ws := t.TempDir()
		sandboxtest.WriteTree(t, ws, files)
		return f.start(t, sandbox.Spec{WorkspaceDir: ws, TaskID: "contract"}), ""
	})
}
