package shim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"

	"github.com/wrenchworks/wrench/workspace"
)

// The workspace operations of OpWorkspace. The git workspace lives in the
// sandbox (an environment snapshot holds the tree and the private state
// repository); the helper serves checkpoints, rollbacks and diffs on it, so
// the host never reads the tree and receives only the patch.
const (
	WSOpen       = "open"       // Reopen the workspace; answers Base
	WSSeal       = "seal"       // end setup; answers Seal
	WSPack       = "pack"       // a chunk of a git pack; Final stores it
	WSSwitch     = "switch"     // move to Checkout; answers Base
	WSCheckpoint = "checkpoint" // answers ID
	WSRollback   = "rollback"   // to ID
	WSDiff       = "diff"       // answers Patch (at most MaxBytes)
	WSChanged    = "changed"    // answers Paths
	// WSScrub replaces secret values (Values) in the files at Paths
	// (absolute) and answers the paths it changed; it needs no open
	// workspace.
	WSScrub = "scrub"
)

// WSRequest is one workspace operation.
type WSRequest struct {
	Action   string              `json:"action"`
	Message  string              `json:"message,omitempty"`
	ID       string              `json:"id,omitempty"`
	Checkout *workspace.Checkout `json:"checkout,omitempty"`
	// Data is a chunk of a pack; Final stores what came so far.
	Data  []byte `json:"data,omitempty"`
	Final bool   `json:"final,omitempty"`
	// MaxBytes caps a diff; a larger one is an error of kind too_large.
	MaxBytes int64 `json:"max_bytes,omitempty"`
	// Owner is who files the workspace restores must belong to, for a
	// helper running as root (setup).
	Owner *workspace.Owner `json:"owner,omitempty"`
	// Paths and Values are a scrub's files and secret values.
	Paths  []string `json:"paths,omitempty"`
	Values []string `json:"values,omitempty"`
}

// WSResponse is a workspace operation's answer.
type WSResponse struct {
	Base  *workspace.Base       `json:"base,omitempty"`
	Seal  *workspace.SealReport `json:"seal,omitempty"`
	ID    string                `json:"id,omitempty"`
	Patch string                `json:"patch,omitempty"`
	// Note says what a patch leaves out (files too large to include).
	Note  string   `json:"note,omitempty"`
	Paths []string `json:"paths,omitempty"`
}

// wsState is the server's workspace and the pack being received.
type wsState struct {
	mu   sync.Mutex
	w    *workspace.Workspace
	pack *os.File
}

func (s *server) workspace(ctx context.Context, req *WSRequest) (*WSResponse, error) {
	if req == nil {
		return nil, fmt.Errorf("workspace: no operation: %w", errInvalidReq)
	}
	if req.Action == WSScrub {
		paths, err := scrub(ctx, req.Paths, req.Values)
		return &WSResponse{Paths: paths}, err
	}
	st := &s.ws
	st.mu.Lock()
	defer st.mu.Unlock()
	if req.Action == WSOpen {
		if st.w == nil {
			w, err := workspace.Reopen(ctx, workspace.ReopenConfig{Tree: s.opts.WorkDir, Owner: req.Owner})
			if err != nil {
				return nil, err
			}
			st.w = w
		}
		b := st.w.Base()
		return &WSResponse{Base: &b}, nil
	}
	if st.w == nil {
		return nil, fmt.Errorf("workspace: %s before open: %w", req.Action, errInvalidReq)
	}
	w := st.w
	switch req.Action {
	case WSSeal:
		rep, err := w.Seal(ctx)
		return &WSResponse{Seal: &rep}, err
	case WSPack:
		return nil, st.receive(ctx, req)
	case WSSwitch:
		if req.Checkout == nil {
			return nil, fmt.Errorf("workspace: switch without a checkout: %w", errInvalidReq)
		}
		if err := w.Switch(ctx, *req.Checkout); err != nil {
			return nil, err
		}
		b := w.Base()
		return &WSResponse{Base: &b}, nil
	case WSCheckpoint:
		id, err := w.Checkpoint(ctx, req.Message)
		return &WSResponse{ID: id}, err
	case WSRollback:
		return nil, w.Rollback(ctx, req.ID)
	case WSDiff:
		patch, err := w.Diff(ctx)
		var partial *workspace.PartialDiff
		if errors.As(err, &partial) {
			return &WSResponse{Patch: patch, Note: err.Error()}, nil
		}
		if err != nil {
			return nil, err
		}
		if req.MaxBytes > 0 && int64(len(patch)) > req.MaxBytes {
			return nil, fmt.Errorf("the patch is %d bytes, over the limit of %d: %w", len(patch), req.MaxBytes, ErrTooLarge)
		}
		return &WSResponse{Patch: patch}, nil
	case WSChanged:
		paths, err := w.Changed(ctx)
		return &WSResponse{Paths: paths}, err
	}
	return nil, fmt.Errorf("workspace: unknown action %q: %w", req.Action, errInvalidReq)
}

// receive appends a pack chunk to a temporary file; the final chunk hands
// the whole pack to the workspace.
func (st *wsState) receive(ctx context.Context, req *WSRequest) error {
	if st.pack == nil {
		f, err := os.CreateTemp("", "wrench-pack-*")
		if err != nil {
			return fmt.Errorf("workspace: receive pack: %w", err)
		}
		st.pack = f
	}
	if _, err := st.pack.Write(req.Data); err != nil {
		st.dropPack()
		return fmt.Errorf("workspace: receive pack: %w", err)
	}
	if !req.Final {
		return nil
	}
	defer st.dropPack()
	if _, err := st.pack.Seek(0, 0); err != nil {
		return err
	}
	return st.w.ReceivePack(ctx, st.pack)
}

func (st *wsState) dropPack() {
	if st.pack != nil {
		st.pack.Close()
		os.Remove(st.pack.Name())
		st.pack = nil
	}
}

// close releases the workspace when the server stops.
func (st *wsState) close() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.dropPack()
	if st.w != nil {
		st.w.Close()
		st.w = nil
	}
}

// scrubLimit bounds the size of a file Scrub reads.
const scrubLimit = 64 << 20

// redacted replaces a secret's value where Scrub finds it.
const redacted = "[REDACTED]"

// scrub replaces every occurrence of the values in the regular files at
// paths (absolute; links are never followed) with "[REDACTED]", keeping
// each file's mode, and returns the paths it changed.
func scrub(ctx context.Context, paths, values []string) ([]string, error) {
	var changed []string
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return changed, err
		}
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != nil {
			continue // a directory's entry, a link, gone since: nothing to scrub
		}
		fi, err := f.Stat()
		if err != nil || !fi.Mode().IsRegular() || fi.Size() > scrubLimit {
			f.Close()
			continue
		}
		data, err := io.ReadAll(io.LimitReader(f, scrubLimit))
		f.Close()
		if err != nil {
			return changed, fmt.Errorf("scrub %s: %w", p, err)
		}
		out := data
		for _, v := range values {
			if v != "" {
				out = bytes.ReplaceAll(out, []byte(v), []byte(redacted))
			}
		}
		if bytes.Equal(out, data) {
			continue
		}
		if err := os.WriteFile(p, out, fi.Mode().Perm()); err != nil {
			return changed, fmt.Errorf("scrub %s: %w", p, err)
		}
		changed = append(changed, p)
	}
	return changed, nil
}
