package docker

import (
	"context"
	"errors"
	"fmt"

	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"

	"github.com/wrenchworks/wrench/sandbox"
)

func sbErr(kind sandbox.ErrorKind, op string, err error) error {
	return &sandbox.Error{Kind: kind, Op: op, Err: err}
}

func invalid(op, format string, args ...any) error {
	return sbErr(sandbox.ErrInvalid, op, fmt.Errorf(format, args...))
}

// engineErr classifies an error from the engine API. Context errors pass
// through unclassified (the caller gave up; nothing is wrong with the
// engine); unknown failures count as unavailable, so the task is retried
// rather than blamed.
func engineErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("sandbox %s: %w", op, err)
	case client.IsErrConnectionFailed(err), errdefs.IsUnavailable(err):
		return sbErr(sandbox.ErrUnavailable, op, fmt.Errorf("docker engine unreachable: %w", err))
	case errdefs.IsInvalidParameter(err):
		return sbErr(sandbox.ErrInvalid, op, err)
	case errdefs.IsNotFound(err):
		return sbErr(sandbox.ErrGone, op, err)
	}
	return sbErr(sandbox.ErrUnavailable, op, err)
}
