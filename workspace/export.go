package workspace

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"
)

// Paths of a workspace inside a sandbox, as Export lays it out and Reopen
// expects it.
const (
	// SandboxTree is the working tree.
	SandboxTree = "/workspace"
	// SandboxState is the private state repository (checkpoints).
	SandboxState = "/.wrench/state"
)

// metaName is the file in the state repository that describes the
// workspace to Reopen.
const metaName = "wrench-workspace.json"

// meta is what Reopen needs besides the repositories themselves.
type meta struct {
	BaseCommit     string   `json:"base_commit"`
	BaseCheckpoint string   `json:"base_checkpoint"`
	Checkout       Checkout `json:"checkout"`
	// EnvIgnore are untracked paths the environment's setup created (a
	// virtualenv, build outputs): snapshots skip them, so they never reach
	// a patch.
	EnvIgnore []string `json:"env_ignore,omitempty"`
}

// Export writes the workspace as a tar stream for extracting at "/" in a
// sandbox: the working tree at SandboxTree and the state repository at
// SandboxState, every entry owned by owner. The workspace must not change
// while it is exported.
func (w *Workspace) Export(ctx context.Context, out io.Writer, owner Owner) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	m := meta{BaseCommit: w.baseCommit.String(), BaseCheckpoint: w.baseCheckpoint.String(), Checkout: w.checkout}
	mj, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(out)
	now := time.Now()
	dir := func(name string, uid, gid int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755, Uid: uid, Gid: gid, ModTime: now})
	}
	if err := dir(".wrench", 0, 0); err != nil {
		return err
	}
	if err := addTree(ctx, tw, w.repoDir, SandboxTree[1:], owner); err != nil {
		return fmt.Errorf("export working tree: %w", err)
	}
	if err := addTree(ctx, tw, w.stateDir, SandboxState[1:], owner); err != nil {
		return fmt.Errorf("export state: %w", err)
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path.Join(SandboxState[1:], metaName), Mode: 0o644,
		Size: int64(len(mj)), Uid: owner.UID, Gid: owner.GID, ModTime: now}); err != nil {
		return err
	}
	if _, err := tw.Write(mj); err != nil {
		return err
	}
	return tw.Close()
}

// addTree writes the tree at dir under prefix. Symlinks are written as
// links; their targets are never read.
func addTree(ctx context.Context, tw *tar.Writer, dir, prefix string, owner Owner) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		name := path.Join(prefix, filepath.ToSlash(rel))
		fi, err := d.Info()
		if err != nil {
			return err
		}
		var link string
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		} else if !fi.Mode().IsRegular() && !fi.IsDir() {
			return nil // sockets, fifos and devices stay behind
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		h.Name, h.Uid, h.Gid, h.Uname, h.Gname = name, owner.UID, owner.GID, "", ""
		if fi.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.CopyN(tw, f, fi.Size())
		return err
	})
}
