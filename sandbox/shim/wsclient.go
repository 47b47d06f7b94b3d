package shim

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/workspace"
)

// packChunk is how much of a pack one request carries.
const packChunk = 4 << 20

func (c *Client) ws(ctx context.Context, req *WSRequest) (*WSResponse, error) {
	resp, err := c.call(ctx, &Request{Op: OpWorkspace, WS: req})
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", req.Action, err)
	}
	if resp.WS == nil {
		resp.WS = &WSResponse{}
	}
	return resp.WS, nil
}

// OpenWorkspace opens the git workspace in the sandbox (laid out by
// workspace.Export). owner is for a helper running as root.
func (c *Client) OpenWorkspace(ctx context.Context, owner *workspace.Owner) (workspace.Base, error) {
	r, err := c.ws(ctx, &WSRequest{Action: WSOpen, Owner: owner})
	if err != nil {
		return workspace.Base{}, err
	}
	if r.Base == nil {
		return workspace.Base{}, errors.New("workspace open: empty response")
	}
	return *r.Base, nil
}

// Seal ends an environment's setup (see workspace.Workspace.Seal).
func (c *Client) Seal(ctx context.Context) (workspace.SealReport, error) {
	r, err := c.ws(ctx, &WSRequest{Action: WSSeal})
	if err != nil || r.Seal == nil {
		return workspace.SealReport{}, err
	}
	return *r.Seal, nil
}

// SendPack streams a git pack into the workspace's repositories.
func (c *Client) SendPack(ctx context.Context, pack io.Reader) error {
	buf := make([]byte, packChunk)
	for {
		n, err := io.ReadFull(pack, buf)
		final := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		if err != nil && !final {
			return fmt.Errorf("send pack: %w", err)
		}
		if _, err := c.ws(ctx, &WSRequest{Action: WSPack, Data: buf[:n], Final: final}); err != nil {
			return err
		}
		if final {
			return nil
		}
	}
}

// Switch moves the untouched workspace to another commit.
func (c *Client) Switch(ctx context.Context, co workspace.Checkout) (workspace.Base, error) {
	r, err := c.ws(ctx, &WSRequest{Action: WSSwitch, Checkout: &co})
	if err != nil || r.Base == nil {
		return workspace.Base{}, err
	}
	return *r.Base, nil
}

// Checkpoint records the whole tree and returns the checkpoint's id.
func (c *Client) Checkpoint(ctx context.Context, message string) (string, error) {
	r, err := c.ws(ctx, &WSRequest{Action: WSCheckpoint, Message: message})
	if err != nil {
		return "", err
	}
	return r.ID, nil
}

// Rollback restores the tree exactly to a checkpoint.
func (c *Client) Rollback(ctx context.Context, id string) error {
	_, err := c.ws(ctx, &WSRequest{Action: WSRollback, ID: id})
	return err
}

// Diff returns the patch from the base commit to the tree; one over max
// bytes is an error matching ErrTooLarge. A patch that leaves out files
// too large to include comes with an error saying which.
func (c *Client) Diff(ctx context.Context, max int64) (string, error) {
	r, err := c.ws(ctx, &WSRequest{Action: WSDiff, MaxBytes: max})
	if err != nil {
		return "", err
	}
	if r.Note != "" {
		return r.Patch, partialNote(r.Note)
	}
	return r.Patch, nil
}

// partialNote is the shim's note on a patch that leaves out files too
// large to include; it matches sandbox.ErrPartialPatch.
type partialNote string

func (n partialNote) Error() string { return string(n) }

// Is makes the note match sandbox.ErrPartialPatch.
func (n partialNote) Is(target error) bool { return target == sandbox.ErrPartialPatch }

// Changed lists the paths that differ from the base commit.
func (c *Client) Changed(ctx context.Context) ([]string, error) {
	r, err := c.ws(ctx, &WSRequest{Action: WSChanged})
	if err != nil {
		return nil, err
	}
	return r.Paths, nil
}

// Scrub replaces secret values in the files at paths (absolute) with
// "[REDACTED]" and returns the paths it changed. Values travel only in
// this request, never in a command line or an environment.
func (c *Client) Scrub(ctx context.Context, paths, values []string) ([]string, error) {
	r, err := c.ws(ctx, &WSRequest{Action: WSScrub, Paths: paths, Values: values})
	if err != nil {
		return nil, err
	}
	return r.Paths, nil
}
