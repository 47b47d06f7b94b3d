package docker

import (
	"context"
	"errors"
	"io"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/shim"
	"github.com/wrenchworks/wrench/workspace"
)

// The git workspace that lives in the sandbox (see package workspace),
// served by the shim. The host sends objects and receives patches; it never
// reads the tree.

// OpenWorkspace opens the workspace laid out in the sandbox. owner is who
// restored files must belong to, for a sandbox started with Root.
func (s *Sandbox) OpenWorkspace(ctx context.Context, owner *workspace.Owner) (workspace.Base, error) {
	if err := s.usable(); err != nil {
		return workspace.Base{}, err
	}
	b, err := s.client.OpenWorkspace(ctx, owner)
	return b, s.wrap("open workspace", err)
}

// Seal ends an environment's setup: tracked files back as committed, the
// setup's own untracked paths kept out of every later patch.
func (s *Sandbox) Seal(ctx context.Context) (workspace.SealReport, error) {
	if err := s.usable(); err != nil {
		return workspace.SealReport{}, err
	}
	r, err := s.client.Seal(ctx)
	return r, s.wrap("seal workspace", err)
}

// SendPack stores a git pack's objects in the workspace's repositories.
func (s *Sandbox) SendPack(ctx context.Context, pack io.Reader) error {
	if err := s.usable(); err != nil {
		return err
	}
	return s.wrap("send pack", s.client.SendPack(ctx, pack))
}

// Switch moves the untouched workspace to another commit.
func (s *Sandbox) Switch(ctx context.Context, co workspace.Checkout) (workspace.Base, error) {
	if err := s.usable(); err != nil {
		return workspace.Base{}, err
	}
	b, err := s.client.Switch(ctx, co)
	return b, s.wrap("switch workspace", err)
}

// Checkpoint records the whole tree (shell changes included) and returns
// the checkpoint's id.
func (s *Sandbox) Checkpoint(ctx context.Context, message string) (string, error) {
	if err := s.usable(); err != nil {
		return "", err
	}
	id, err := s.client.Checkpoint(ctx, message)
	return id, s.wrap("checkpoint", err)
}

// Rollback restores the tree exactly to a checkpoint.
func (s *Sandbox) Rollback(ctx context.Context, id string) error {
	if err := s.usable(); err != nil {
		return err
	}
	return s.wrap("rollback", s.client.Rollback(ctx, id))
}

// Diff returns the patch from the base commit to the tree, at most
// Config.MaxPatchBytes; a larger one is an error saying so.
func (s *Sandbox) Diff(ctx context.Context) (string, error) {
	if err := s.usable(); err != nil {
		return "", err
	}
	patch, err := s.client.Diff(ctx, s.p.cfg.MaxPatchBytes)
	if errors.Is(err, shim.ErrTooLarge) {
		// The task's work is over the cap: a limit, not a fault to retry.
		return "", sbErr(sandbox.ErrLimit, "diff", err)
	}
	return patch, s.wrap("diff", err)
}

// Changed lists the paths that differ from the base commit.
func (s *Sandbox) Changed(ctx context.Context) ([]string, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	paths, err := s.client.Changed(ctx)
	return paths, s.wrap("changed", err)
}

// Scrub replaces secret values in the sandbox's files at paths with
// "[REDACTED]" and returns the paths it changed.
func (s *Sandbox) Scrub(ctx context.Context, paths, values []string) ([]string, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	changed, err := s.client.Scrub(ctx, paths, values)
	return changed, s.wrap("scrub", err)
}
