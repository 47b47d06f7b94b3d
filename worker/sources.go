package worker

import (
	"context"
	"errors"

	"github.com/wrenchworks/wrench/environment"
	"github.com/wrenchworks/wrench/task"
	"github.com/wrenchworks/wrench/workspace"
)

// MirrorSources resolves tasks' commits in a workspace manager's mirrors,
// classifying clone errors as the task's fault (InputError) or a passing
// one (TransientError). auth may be nil.
func MirrorSources(m *workspace.Manager, auth *workspace.Auth) Sources {
	return mirrorSources{m: m, auth: auth}
}

type mirrorSources struct {
	m    *workspace.Manager
	auth *workspace.Auth
}

func (o mirrorSources) Resolve(ctx context.Context, repo task.Repo) (Source, error) {
	c, err := o.m.Resolve(ctx, repo, o.auth)
	if err != nil {
		return nil, ClassifyClone(err)
	}
	return commitSource{c}, nil
}

// commitSource is a workspace.Commit as a Source.
type commitSource struct{ *workspace.Commit }

func (c commitSource) Clone(ctx context.Context, taskID string) (environment.Clone, error) {
	ws, err := c.Commit.Clone(ctx, taskID)
	if err != nil {
		return nil, ClassifyClone(err)
	}
	return ws, nil
}

// ClassifyClone marks a clone error as the task's fault (InputError) or a
// passing one (TransientError).
func ClassifyClone(err error) error {
	var ce *workspace.CloneError
	if errors.As(err, &ce) {
		if ce.Retriable {
			return &TransientError{Err: err}
		}
		return &InputError{Err: err}
	}
	return err
}
