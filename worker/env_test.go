package worker

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/sandbox"
)

func TestEnvErr(t *testing.T) {
	cases := []struct {
		err        error
		envFailure bool
	}{
		{nil, false},
		{fs.ErrNotExist, false},
		{&sandbox.Error{Kind: sandbox.ErrGone, Op: "exec", Err: errBoom}, true},
		{&sandbox.Error{Kind: sandbox.ErrLimit, Op: "write", Err: errBoom}, true},
		{&sandbox.Error{Kind: sandbox.ErrUnavailable, Op: "read", Err: errBoom}, true},
		{&sandbox.Error{Kind: sandbox.ErrInvalid, Op: "read", Err: errBoom}, false},
	}
	for _, c := range cases {
		got := envErr(c.err)
		if errors.Is(got, agent.ErrEnvFailed) != c.envFailure {
			t.Errorf("envErr(%v) = %v; env failure %v, want %v", c.err, got, !c.envFailure, c.envFailure)
		}
		if c.err != nil && !errors.Is(got, c.err) {
			t.Errorf("envErr(%v) lost the cause", c.err)
		}
	}
}
