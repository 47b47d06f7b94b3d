package workspace

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// A workspace also lives inside a sandbox: an environment snapshot holds
// the working tree and the state repository (laid out by Export), and the
// in-sandbox helper serves Checkpoint, Rollback and Diff there with the
// same code, so the host never reads the tree. Reopen picks such a
// workspace up; Seal ends an environment's setup; ReceivePack and Switch
// move a snapshot's tree to a task's commit.

// ReopenConfig says where a workspace lies inside a sandbox.
type ReopenConfig struct {
	// Tree and State default to SandboxTree and SandboxState.
	Tree, State string
	// Owner is who restored files must belong to; nil leaves them to the
	// process (the helper already runs as the sandbox user).
	Owner  *Owner
	Logger *slog.Logger
}

// Reopen opens the workspace Export laid out (and Seal or Switch left), as
// it was when its base checkpoint was made. Close releases it without
// removing anything.
func Reopen(ctx context.Context, cfg ReopenConfig) (*Workspace, error) {
	if cfg.Tree == "" {
		cfg.Tree = SandboxTree
	}
	if cfg.State == "" {
		cfg.State = SandboxState
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	data, err := os.ReadFile(filepath.Join(cfg.State, metaName))
	if err != nil {
		return nil, fmt.Errorf("reopen workspace: %w", err)
	}
	var m meta
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("reopen workspace: %s: %w", metaName, err)
	}
	w := &Workspace{
		m:           &Manager{cfg: Config{Owner: cfg.Owner, Deployment: "sandbox"}, log: log},
		repoDir:     cfg.Tree,
		stateDir:    cfg.State,
		checkpoints: map[plumbing.Hash]plumbing.Hash{},
		stat:        map[string]statEntry{},
		checkout:    m.Checkout,
		envIgnore:   map[string]bool{},
		noClose:     true,
	}
	for _, p := range m.EnvIgnore {
		w.envIgnore[p] = true
	}
	w.st = openStorage(cfg.State, 32<<20)
	w.ow = newObjectWriter(w.st)
	if err := w.loadBase(ctx, plumbing.NewHash(m.BaseCommit), plumbing.NewHash(m.BaseCheckpoint)); err != nil {
		w.st.Close()
		return nil, fmt.Errorf("reopen workspace: %w", err)
	}
	return w, nil
}

// loadBase reads the base commit's tree and the checkpoint chain.
func (w *Workspace) loadBase(ctx context.Context, base, baseCheckpoint plumbing.Hash) error {
	c, err := object.GetCommit(w.st, base)
	if err != nil {
		return fmt.Errorf("base commit %s: %w", base, err)
	}
	w.baseCommit, w.baseTree = c.Hash, c.TreeHash
	if w.baseFlat, err = flatten(w.st, c.TreeHash); err != nil {
		return err
	}
	for _, e := range w.baseFlat {
		w.ow.known[e.Hash] = struct{}{}
	}
	w.ow.known[c.TreeHash] = struct{}{}
	w.checkpoints[c.Hash] = c.TreeHash
	w.baseCheckpoint = baseCheckpoint
	ref, err := w.st.Reference(checkpointRef)
	if err != nil {
		return fmt.Errorf("checkpoint ref: %w", err)
	}
	w.tip = ref.Hash()
	for h := w.tip; !h.IsZero(); {
		if err := ctx.Err(); err != nil {
			return err
		}
		cp, err := object.GetCommit(w.st, h)
		if err != nil {
			return fmt.Errorf("checkpoint %s: %w", h, err)
		}
		w.checkpoints[h] = cp.TreeHash
		if h == baseCheckpoint || len(cp.ParentHashes) == 0 {
			break
		}
		h = cp.ParentHashes[0]
	}
	return nil
}

// SealReport says what Seal did to the tree setup left.
type SealReport struct {
	// Restored are tracked files setup changed or deleted, put back as the
	// commit has them.
	Restored []string `json:"restored,omitempty"`
	// Ignored are the untracked paths setup created, which snapshots skip
	// from now on (the environment, not the task's work).
	Ignored []string `json:"ignored,omitempty"`
}

// Seal ends an environment's setup: tracked files setup changed go back to
// the base commit's content, the untracked paths it created (outside what
// .gitignore already hides) are recorded as part of the environment so no
// patch ever includes them, and the record is saved for Reopen.
func (w *Workspace) Seal(ctx context.Context) (SealReport, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	snap, err := w.current(ctx, "seal")
	if err != nil {
		return SealReport{}, err
	}
	var rep SealReport
	cur := flatTree{}
	for p, e := range snap.files {
		if _, tracked := w.baseFlat[p]; tracked {
			cur[p] = e
			continue
		}
		if parent := path.Dir(p); parent != "." {
			if _, tracked := w.baseFlat[parent]; !tracked {
				continue // inside a new directory, which is ignored whole
			}
		}
		rep.Ignored = append(rep.Ignored, p)
	}
	for _, c := range compareTrees(w.baseFlat, cur) {
		if c.from != "" {
			rep.Restored = append(rep.Restored, c.from)
		}
	}
	if err := w.restore(ctx, cur, w.baseFlat); err != nil {
		return rep, fmt.Errorf("seal: %w", err)
	}
	sort.Strings(rep.Ignored)
	for _, p := range rep.Ignored {
		w.envIgnore[p] = true
	}
	if err := w.writeExclude(); err != nil {
		return rep, fmt.Errorf("seal: %w", err)
	}
	return rep, w.saveMeta()
}

// ignoreEscaper quotes gitignore pattern characters in a literal path.
var ignoreEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "!", `\!`, "#", `\#`, " ", `\ `)

// writeExclude lists the environment's paths in the working tree's
// .git/info/exclude, so git in the sandbox does not show them either.
func (w *Workspace) writeExclude() error {
	if len(w.envIgnore) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("# The environment's own paths, made by setup (Wrench).\n")
	paths := make([]string, 0, len(w.envIgnore))
	for p := range w.envIgnore {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		b.WriteString("/" + ignoreEscaper.Replace(p) + "\n")
	}
	dir := filepath.Join(w.repoDir, ".git", "info")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "exclude"), []byte(b.String()), 0o644)
}

func (w *Workspace) saveMeta() error {
	m := meta{BaseCommit: w.baseCommit.String(), BaseCheckpoint: w.baseCheckpoint.String(), Checkout: w.checkout}
	for p := range w.envIgnore {
		m.EnvIgnore = append(m.EnvIgnore, p)
	}
	sort.Strings(m.EnvIgnore)
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp := filepath.Join(w.stateDir, metaName+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("save workspace record: %w", err)
	}
	return os.Rename(tmp, filepath.Join(w.stateDir, metaName))
}

// ReceivePack stores the objects of a git pack stream (from Commit.Pack)
// in the state repository and the working tree's .git.
func (w *Workspace) ReceivePack(ctx context.Context, r io.Reader) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	tmp, err := os.CreateTemp(w.stateDir, "incoming-*.pack")
	if err != nil {
		return fmt.Errorf("receive pack: %w", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if _, err := io.Copy(tmp, r); err != nil {
		return fmt.Errorf("receive pack: %w", err)
	}
	for _, dir := range []string{w.stateDir, filepath.Join(w.repoDir, ".git")} {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := tmp.Seek(0, io.SeekStart); err != nil {
			return err
		}
		st := w.st
		if dir != w.stateDir {
			st = openStorage(dir, 1<<20)
			defer st.Close()
		}
		pw, err := st.PackfileWriter()
		if err != nil {
			return fmt.Errorf("receive pack into %s: %w", dir, err)
		}
		if _, err := io.Copy(pw, tmp); err != nil {
			pw.Close()
			return fmt.Errorf("receive pack into %s: %w", dir, err)
		}
		if err := pw.Close(); err != nil {
			return fmt.Errorf("receive pack into %s: %w", dir, err)
		}
	}
	w.st.ObjectStorage.Reindex()
	return nil
}

// Switch moves an untouched tree from its base commit to co.Commit (whose
// objects ReceivePack brought, or the repositories already held): files,
// the working tree's HEAD, refs and index, and the base checkpoint. Paths
// recorded by Seal stay as they are.
func (w *Workspace) Switch(ctx context.Context, co Checkout) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	h := plumbing.NewHash(co.Commit)
	if h == w.baseCommit && co == w.checkout {
		return nil
	}
	c, err := object.GetCommit(w.st, h)
	if err != nil {
		return fmt.Errorf("switch to %s: %w", co.Commit, err)
	}
	target, err := flatten(w.st, c.TreeHash)
	if err != nil {
		return fmt.Errorf("switch to %s: %w", co.Commit, err)
	}
	if h != w.baseCommit {
		if err := w.restore(ctx, w.baseFlat, target); err != nil {
			return fmt.Errorf("switch to %s: %w", co.Commit, err)
		}
	}
	gitDir := filepath.Join(w.repoDir, ".git")
	if err := writeWorkGitDir(gitDir, co.gitDir()); err != nil {
		return fmt.Errorf("switch to %s: write .git: %w", co.Commit, err)
	}
	if err := w.writeIndexFor(gitDir, target); err != nil {
		return fmt.Errorf("switch to %s: %w", co.Commit, err)
	}
	w.baseFlat, w.baseCommit, w.baseTree, w.checkout = target, c.Hash, c.TreeHash, co
	for _, e := range target {
		w.ow.known[e.Hash] = struct{}{}
	}
	w.checkpoints[c.Hash] = c.TreeHash
	if w.baseCheckpoint, err = w.commit(c.TreeHash, "wrench: base "+c.Hash.String()); err != nil {
		return fmt.Errorf("switch to %s: base checkpoint: %w", co.Commit, err)
	}
	if err := w.st.SetReference(plumbing.NewHashReference("refs/wrench/base", c.Hash)); err != nil {
		return fmt.Errorf("switch to %s: %w", co.Commit, err)
	}
	return w.saveMeta()
}

// writeIndexFor writes the working tree's index for flat, with each
// file's current stat data, and remembers the hashes of files that did
// not change just now.
func (w *Workspace) writeIndexFor(gitDir string, flat flatTree) error {
	root, err := os.OpenRoot(w.repoDir)
	if err != nil {
		return err
	}
	defer root.Close()
	now := time.Now()
	var entries []*index.Entry
	for _, p := range flat.sortedPaths() {
		e := flat[p]
		if e.isDir() {
			continue
		}
		spec := fileSpec{path: p, mode: e.Mode, hash: e.Hash}
		if e.Mode == filemode.Submodule {
			entries = append(entries, indexEntry(spec, fileStat{}))
			continue
		}
		fi, err := root.Lstat(p)
		if err != nil {
			return fmt.Errorf("index %s: %w", p, err)
		}
		st, _ := sysStat(fi)
		entries = append(entries, indexEntry(spec, st))
		if e.Mode != filemode.Symlink {
			w.remember(p, statKeyOf(fi), e.Hash, now)
		}
	}
	return writeIndex(gitDir, entries)
}

// Base is a workspace's base commit and its checkpoint.
type Base struct {
	Commit     string   `json:"commit"`
	Checkpoint string   `json:"checkpoint"`
	Checkout   Checkout `json:"checkout"`
	// EnvIgnore are the environment's own untracked paths.
	EnvIgnore []string `json:"env_ignore,omitempty"`
}

// Base returns the workspace's base.
func (w *Workspace) Base() Base {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := Base{Commit: w.baseCommit.String(), Checkpoint: w.baseCheckpoint.String(), Checkout: w.checkout}
	for p := range w.envIgnore {
		b.EnvIgnore = append(b.EnvIgnore, p)
	}
	sort.Strings(b.EnvIgnore)
	return b
}
