package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/docker/docker/client"

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
//
// The engine's invalid-parameter errors are never the task's fault: the
// spec's task-given parts (limits, network, image name, environment) are
// checked before any call, so what the engine still refuses is the
// deployment's configuration (a bind-mount source missing on the engine's
// host, an unknown runtime, an option the engine does not support). They
// are reported as unavailable, naming the problem, so the task is not
// rejected for it.
func engineErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("sandbox %s: %w", op, err)
	case client.IsErrConnectionFailed(err), cerrdefs.IsUnavailable(err):
		return sbErr(sandbox.ErrUnavailable, op, fmt.Errorf("docker engine unreachable: %w", err))
	case cerrdefs.IsInvalidArgument(err):
		return sbErr(sandbox.ErrUnavailable, op, fmt.Errorf("the docker engine refused the sandbox's configuration (a deployment problem, not the task's): %w", err))
	case cerrdefs.IsNotFound(err):
		return sbErr(sandbox.ErrGone, op, err)
	}
	return sbErr(sandbox.ErrUnavailable, op, err)
}

// createErr classifies a failed container create.
func (p *Provider) createErr(spec sandbox.Spec, err error) error {
	switch {
	case cerrdefs.IsNotFound(err):
		return sbErr(sandbox.ErrImageMissing, "start", fmt.Errorf("image %s not found; run `wrench image build`", spec.Image))
	case cerrdefs.IsInvalidArgument(err) && strings.Contains(err.Error(), "bind source path does not exist"):
		return sbErr(sandbox.ErrUnavailable, "create", fmt.Errorf("a bind-mount source does not exist on the docker engine's host (a deployment problem, not the task's): "+
			"the shim binary (%s) and the workspaces must be at the same paths there as here "+
			"(when wrench runs in a container, mount its data dir at the same path on both sides): %w", p.cfg.ShimPath, err))
	}
	return engineErr("create", err)
}

// checkImage refuses an image reference the engine could not parse.
func checkImage(op, image string) error {
	if _, err := reference.ParseAnyReference(image); err != nil {
		return invalid(op, "image %q: %v", image, err)
	}
	return nil
}
