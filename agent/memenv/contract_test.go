package memenv_test

import (
	"testing"

	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/internal/sandboxtest"
	"github.com/wrenchworks/wrench/sandbox"
)

func TestContract(t *testing.T) {
	sandboxtest.Run(t, func(t *testing.T, files map[string]string) (sandbox.Env, string) {
		return memenv.New(files), ""
	})
}
