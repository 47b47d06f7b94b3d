package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/wrenchworks/wrench/sandbox"
)

var _ sandbox.Checkpointer = (*Workspace)(nil)

// checkpointRef is the private ref the checkpoint commits hang on, in the
// workspace's state repository; no branch, HEAD or index is ever touched.
const checkpointRef = plumbing.ReferenceName("refs/wrench/checkpoints")

// Workspace is one task's clone. Its working tree is [Workspace.Dir]; the
// checkpoints live in a private state repository next to it, outside what
// the sandbox can reach, so commands run there cannot corrupt them. Methods
// are safe for concurrent use (they run one at a time).
type Workspace struct {
	m       *Manager
	name    string // directory name under Config.Root
	dir     string // Config.Root/name
	repoDir string // the working tree (Dir)
	// externalDir is set when repoDir lies outside the workspace's own
	// directory (OpenIn); Close removes it too.
	externalDir bool
	stateDir    string // the private state repository

	mu     sync.Mutex
	closed bool
	st     *filesystem.Storage
	ow     *objectWriter

	baseCommit     plumbing.Hash
	baseTree       plumbing.Hash
	baseFlat       flatTree
	baseCheckpoint plumbing.Hash
	tip            plumbing.Hash
	// checkpoints maps checkpoint ids (and the base commit) to their trees.
	checkpoints map[plumbing.Hash]plumbing.Hash
	stat        map[string]statEntry
	info        CloneInfo
	// checkout is how the working tree's .git names the base commit.
	checkout Checkout
	// envIgnore are untracked paths the environment's setup made; see
	// meta.EnvIgnore.
	envIgnore map[string]bool
	// noClose is set for a workspace reopened inside a sandbox: Close
	// releases it but never removes the tree.
	noClose bool
	// maxFile is the largest file a patch includes (0: the default).
	maxFile int64
}

// CloneInfo says how a workspace was produced, for logs and metrics.
type CloneInfo struct {
	// Mirror is "created", "updated", "reused" (the mirror already had what
	// was needed) or "disabled".
	Mirror string
	// CheckoutCache is true when the working tree was copied from a
	// mirror's cached checkout instead of being decoded from git objects.
	CheckoutCache bool
	// Shallow is true when the workspace's history is truncated.
	Shallow bool
	// Ref is the full ref checked out ("" for a detached commit).
	Ref string
	// Files is the number of paths checked out.
	Files int
	// Duration is how long Open took.
	Duration time.Duration
}

// Dir is the host path of the working tree, to mount at /workspace.
func (w *Workspace) Dir() string { return w.repoDir }

// BaseCommit is the full sha of the commit that was checked out.
func (w *Workspace) BaseCommit() string { return w.baseCommit.String() }

// BaseCheckpoint is the id of the checkpoint Open made; Rollback to it (or
// to BaseCommit) restores the tree as cloned.
func (w *Workspace) BaseCheckpoint() string { return w.baseCheckpoint.String() }

// CloneInfo says how the workspace was cloned.
func (w *Workspace) CloneInfo() CloneInfo { return w.info }

// Checkpoint records the whole working tree (tracked, untracked and deleted
// files, whoever changed them) as a commit on the private checkpoint ref and
// returns its id. Ignored files are not recorded.
func (w *Workspace) Checkpoint(ctx context.Context, message string) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	snap, err := w.current(ctx, "checkpoint")
	if err != nil {
		return "", err
	}
	h, err := w.commit(snap.tree, message)
	if err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	return h.String(), nil
}

// commit records tree as the next checkpoint commit.
func (w *Workspace) commit(tree plumbing.Hash, message string) (plumbing.Hash, error) {
	if message == "" {
		message = "checkpoint"
	}
	sig := object.Signature{Name: "wrench", Email: "wrench@localhost", When: time.Now()}
	c := &object.Commit{
		Author:       sig,
		Committer:    sig,
		Message:      message + "\n",
		TreeHash:     tree,
		ParentHashes: []plumbing.Hash{w.tip},
	}
	o := w.st.NewEncodedObject()
	if err := c.Encode(o); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("encode commit: %w", err)
	}
	h, err := w.ow.put(o)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if err := w.st.SetReference(plumbing.NewHashReference(checkpointRef, h)); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("update %s: %w", checkpointRef, err)
	}
	w.tip = h
	w.checkpoints[h] = tree
	return h, nil
}

// Rollback restores the working tree exactly to checkpoint id (or the base
// commit): file contents, executable bits, symlinks, empty directories,
// and deletions of everything the checkpoint does not record. Ignored files
// the checkpoint does not record are left alone. Restored files belong to
// Config.Owner.
func (w *Workspace) Rollback(ctx context.Context, id string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	var h plumbing.Hash
	if plumbing.IsHash(id) {
		h = plumbing.NewHash(id)
	}
	tree, ok := w.checkpoints[h]
	if !ok {
		return fmt.Errorf("rollback %q: %w", id, ErrUnknownCheckpoint)
	}
	target := w.baseFlat
	if tree != w.baseTree {
		var err error
		if target, err = flatten(w.st, tree); err != nil {
			return fmt.Errorf("rollback %s: %w", id, err)
		}
	}
	cur, err := w.snapshot(ctx)
	if err != nil {
		return fmt.Errorf("rollback %s: %w", id, err)
	}
	if err := w.restore(ctx, cur.files, target); err != nil {
		return fmt.Errorf("rollback %s: %w", id, err)
	}
	return nil
}

// Diff returns the changes from the base commit to the working tree as a
// git-format unified diff that `git apply` accepts: added, deleted and
// renamed files, mode changes, symlinks and binary files (as GIT binary
// patch literals). It is "" when nothing changed. Files over the size
// limit (DefaultMaxDiffFile) are left out: the patch then comes with a
// *PartialDiff naming them.
func (w *Workspace) Diff(ctx context.Context) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	snap, err := w.current(ctx, "diff")
	if err != nil {
		return "", err
	}
	out, err := formatPatch(ctx, w.st, w.baseFlat, snap.files, w.maxDiffFile())
	var partial *PartialDiff
	if errors.As(err, &partial) {
		return out, err
	}
	if err != nil {
		return "", fmt.Errorf("diff: %w", err)
	}
	return out, nil
}

// maxDiffFile is the largest file a patch includes.
func (w *Workspace) maxDiffFile() int64 {
	if w.maxFile > 0 {
		return w.maxFile
	}
	return DefaultMaxDiffFile
}

// Changed lists the paths that differ between the base commit and the
// working tree (both sides of a rename), sorted.
func (w *Workspace) Changed(ctx context.Context) ([]string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	snap, err := w.current(ctx, "changed")
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, c := range compareTrees(w.baseFlat, snap.files) {
		if c.from != "" {
			set[c.from] = true
		}
		if c.to != "" {
			set[c.to] = true
		}
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}

// Close removes the workspace's directory (working tree and checkpoints).
// It is idempotent.
func (w *Workspace) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	if w.st != nil {
		_ = w.st.Close()
	}
	if w.noClose {
		return nil
	}
	if err := w.m.removeDir(w.name); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("close workspace %s: %w", w.name, err)
	}
	if w.externalDir {
		// RemoveAll removes symlinks, never what they point to.
		if err := os.RemoveAll(w.repoDir); err != nil {
			return fmt.Errorf("close workspace %s: remove %s: %w", w.name, w.repoDir, err)
		}
	}
	return nil
}
