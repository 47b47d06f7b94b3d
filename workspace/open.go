package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/wrenchworks/wrench/task"
)

// Open clones repo into a fresh directory for taskID and makes the base
// checkpoint. The URL may be https:// (the token of Config.Credentials, or
// else auth when set, is sent as basic auth),
// file:// or a local path; Ref names a branch or tag (empty: the default
// branch) and Commit pins a commit (full or abbreviated sha). With a mirror
// directory configured the clone comes from the host's mirror of the
// repository, fetched first when it lacks the commit; without one it is
// shallow where the source allows.
//
// Errors are *CloneError, retriable or not; nothing is left on disk.
func (m *Manager) Open(ctx context.Context, taskID string, repo task.Repo, auth *Auth) (*Workspace, error) {
	return m.open(ctx, taskID, repo, auth, "")
}

// OpenIn is Open with the working tree in dir, an existing empty directory
// outside Root — a warm sandbox's, already mounted at /workspace. The
// workspace's labels and private state stay under Root as usual; Close
// removes dir as well.
func (m *Manager) OpenIn(ctx context.Context, taskID, dir string, repo task.Repo, auth *Auth) (*Workspace, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("workspace: open in %q: not an absolute path", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, &CloneError{URL: redact(repo.URL), Op: "open working directory", Retriable: true, Err: err}
	}
	if len(entries) > 0 {
		return nil, fmt.Errorf("workspace: open in %s: directory is not empty", dir)
	}
	return m.open(ctx, taskID, repo, auth, dir)
}

func (m *Manager) open(ctx context.Context, taskID string, repo task.Repo, auth *Auth, workTree string) (*Workspace, error) {
	start := time.Now()
	if strings.TrimSpace(taskID) == "" {
		return nil, errors.New("workspace: open: empty task id")
	}
	src, f, err := m.fetcherFor(ctx, repo, auth)
	if err != nil {
		return nil, err
	}
	w, err := m.newWorkspace(taskID, workTree)
	if err != nil {
		return nil, &CloneError{URL: src.display, Op: "create workspace", Retriable: true, Err: err, secrets: src.secrets}
	}
	if err := m.populate(ctx, w, f, src, repo); err != nil {
		_ = w.Close()
		m.log.WarnContext(ctx, "workspace clone failed", "task_id", taskID, "url", src.display, "err", err,
			"retriable", Retriable(err), "duration", time.Since(start))
		return nil, err
	}
	w.info.Duration = time.Since(start)
	m.log.InfoContext(ctx, "workspace opened", "task_id", taskID, "url", src.display, "ref", w.info.Ref,
		"commit", w.BaseCommit(), "mirror", w.info.Mirror, "checkout_cache", w.info.CheckoutCache,
		"shallow", w.info.Shallow, "files", w.info.Files, "duration", w.info.Duration)
	return w, nil
}

// newWorkspace makes the directory of a new workspace for taskID (with
// its working tree in workTree when that is set).
func (m *Manager) newWorkspace(taskID, workTree string) (*Workspace, error) {
	name, err := m.newDir(taskID)
	if err != nil {
		if name != "" {
			_ = m.removeDir(name)
		}
		return nil, err
	}
	dir := filepath.Join(m.cfg.Root, name)
	w := &Workspace{
		m:           m,
		name:        name,
		dir:         dir,
		repoDir:     filepath.Join(dir, "repo"),
		externalDir: workTree != "",
		stateDir:    filepath.Join(dir, "state"),
		checkpoints: map[plumbing.Hash]plumbing.Hash{},
		stat:        map[string]statEntry{},
	}
	if workTree != "" {
		w.repoDir = workTree
	}
	return w, nil
}

// populate fills w: objects into the state repository, the working tree's
// .git, the checkout, the index, ownership and the base checkpoint.
func (m *Manager) populate(ctx context.Context, w *Workspace, f fetcher, src source, repo task.Repo) error {
	fail := func(op string, err error) error { return cloneErr(src, op, err) }
	pt := newPhaseTimer()
	defer func() { m.log.DebugContext(ctx, "workspace clone phases", pt.attrs()...) }()
	if err := initBare(w.stateDir); err != nil {
		return fail("create workspace", err)
	}
	if m.cfg.MirrorDir == "" {
		w.info.Mirror = "disabled"
		p, c, err := fetchDirect(ctx, f, src, repo, w.stateDir)
		if err != nil {
			return err
		}
		return m.fill(ctx, w, src, p, c, nil, pt)
	}
	mr, err := m.lockMirror(ctx, src)
	if err != nil {
		return fail("lock mirror", err)
	}
	defer mr.lock.unlock()
	p, c, state, err := mr.sync(ctx, f, src, repo)
	if err != nil {
		return err
	}
	w.info.Mirror = state
	pt.mark("sync")
	if state == "created" {
		m.mirrorMisses.Add(1)
	} else {
		m.mirrorHits.Add(1)
	}
	var cache *checkoutCache
	var blobs []*os.File
	if m.cfg.CheckoutCache > 0 {
		if cache, err = mr.checkout(ctx, c.TreeHash, m.cfg.CheckoutCache); err != nil {
			return fail("cache checkout", err)
		}
		// Opened before the lock is shared, so a concurrent eviction
		// cannot take them away.
		for part := range cacheParts {
			f, err := os.Open(filepath.Join(cache.dir, fmt.Sprintf("blobs.%d", part)))
			if err != nil {
				return fail("cache checkout", err)
			}
			defer f.Close()
			blobs = append(blobs, f)
		}
		pt.mark("cache")
	}
	// Copying the working tree only reads the mirror: let other Opens
	// of the same repository read it too.
	if err := mr.lock.set(ctx, false); err != nil {
		return fail("lock mirror", err)
	}
	pt.mark("relock")
	return m.fill(ctx, w, src, p, c, &mirrorSource{mr: mr, cache: cache, blobs: blobs}, pt)
}

// mirrorSource is a locked mirror a workspace is filled from, with the
// cached checkout of its tree when there is one.
type mirrorSource struct {
	mr    *mirror
	cache *checkoutCache
	blobs []*os.File
}

// fill makes w the checkout of commit c: objects (from ms's mirror, or
// already fetched into the state repository when ms is nil), the working
// tree's .git, files, index, ownership and the base checkpoint.
func (m *Manager) fill(ctx context.Context, w *Workspace, src source, p plan, c *object.Commit, ms *mirrorSource, pt *phaseTimer) error {
	fail := func(op string, err error) error { return cloneErr(src, op, err) }
	var (
		cache *checkoutCache
		blobs []*os.File
	)
	if ms != nil {
		cache, blobs = ms.cache, ms.blobs
		if _, err := linkObjects(ms.mr.repo, w.stateDir, anyFile); err != nil {
			return fail("link objects", err)
		}
		pt.mark("link")
	}
	w.st = openStorage(w.stateDir, 32<<20)
	w.ow = newObjectWriter(w.st)
	w.baseCommit, w.baseTree = c.Hash, c.TreeHash

	linked, err := m.prepareGitDir(w, src, p, c)
	if err != nil {
		return err
	}
	gitDir := filepath.Join(w.repoDir, ".git")
	pt.mark("gitdir")

	root, err := os.OpenRoot(w.repoDir)
	if err != nil {
		return fail("checkout", err)
	}
	defer root.Close()
	var (
		dirs    []string
		files   []fileSpec
		content contentSource
	)
	if cache != nil {
		fds := make([]int, len(blobs))
		for i, f := range blobs {
			fds[i] = int(f.Fd())
		}
		w.baseFlat, dirs, files, content = cache.flat, cache.dirs, cache.files, blobFileContent{fds: fds}
		w.info.CheckoutCache = true
	} else {
		if w.baseFlat, err = flatten(w.st, c.TreeHash); err != nil {
			return fail("checkout", err)
		}
		dirs, files = checkoutPlan(w.baseFlat)
		content = objectContent{dir: w.stateDir}
	}
	pt.mark("plan")
	outs, err := m.materialize(ctx, root, dirs, files, content)
	if err != nil {
		return fail("checkout", err)
	}
	pt.mark("files")
	w.info.Files = len(files)
	entries := make([]*index.Entry, len(outs))
	now := time.Now()
	for i, o := range outs {
		entries[i] = o.entry
		if s := files[i]; s.mode == filemode.Regular || s.mode == filemode.Executable {
			w.remember(s.path, o.key, s.hash, now)
		}
	}
	if err := writeIndex(gitDir, entries); err != nil {
		return fail("checkout", err)
	}
	pt.mark("index")
	isLinked := map[string]bool{}
	for _, l := range linked {
		isLinked[filepath.ToSlash(filepath.Join(".git", l))] = true
	}
	if err := m.chownTree(root, ".git", func(p string) bool { return isLinked[p] }); err != nil {
		return fail("chown", err)
	}
	if err := m.lchown(root, "."); err != nil {
		return fail("chown", err)
	}
	pt.mark("chown")
	for _, e := range w.baseFlat {
		w.ow.known[e.Hash] = struct{}{}
	}
	w.ow.known[c.TreeHash] = struct{}{}

	w.tip = c.Hash
	w.checkpoints[c.Hash] = c.TreeHash
	if w.baseCheckpoint, err = w.commit(c.TreeHash, "wrench: base "+c.Hash.String()); err != nil {
		return fail("base checkpoint", err)
	}
	if err := w.st.SetReference(plumbing.NewHashReference("refs/wrench/base", c.Hash)); err != nil {
		return fail("base checkpoint", err)
	}
	pt.mark("checkpoint")
	return nil
}

// prepareGitDir creates the working tree's directory and its .git, which
// names the commit as the plan says (branch, ref, credential-free origin)
// and links the state directory's objects; it returns the linked files
// (relative to .git).
func (m *Manager) prepareGitDir(w *Workspace, src source, p plan, c *object.Commit) ([]string, error) {
	fail := func(op string, err error) error { return cloneErr(src, op, err) }
	gitDir := filepath.Join(w.repoDir, ".git")
	if err := os.Mkdir(w.repoDir, 0o755); err != nil && !(w.externalDir && errors.Is(err, fs.ErrExist)) {
		return nil, fail("create workspace", err)
	}
	g := gitDirFor(p, c.Hash, src.display, w.st.HasEncodedObject)
	w.checkout = checkoutOf(g)
	if p.commit == "" || g.branch != "" {
		w.info.Ref = p.ref.String() // else a pinned commit is checked out detached
	}
	if err := writeWorkGitDir(gitDir, g); err != nil {
		return nil, fail("write .git", err)
	}
	linked, err := linkObjects(w.stateDir, gitDir, m.linkIntoWorkspace)
	if err != nil {
		return nil, fail("link objects", err)
	}
	if _, err := os.Stat(filepath.Join(gitDir, "shallow")); err == nil {
		w.info.Shallow = true
	}
	return linked, nil
}

// phaseTimer records how long each step of a clone took, for debug logs.
type phaseTimer struct {
	last  time.Time
	names []string
	took  []time.Duration
}

func newPhaseTimer() *phaseTimer { return &phaseTimer{last: time.Now()} }

func (p *phaseTimer) mark(name string) {
	now := time.Now()
	p.names = append(p.names, name)
	p.took = append(p.took, now.Sub(p.last))
	p.last = now
}

func (p *phaseTimer) attrs() []any {
	out := make([]any, 0, 2*len(p.names))
	for i, n := range p.names {
		out = append(out, n, p.took[i])
	}
	return out
}

// fetchDirect fetches into the state repository without a mirror: one
// commit deep when a ref (or a full commit sha the server will serve) is
// enough, everything otherwise.
func fetchDirect(ctx context.Context, f fetcher, src source, repo task.Repo, stateDir string) (plan, *object.Commit, error) {
	refs, head, err := f.refs(ctx)
	if err != nil {
		return plan{}, nil, cloneErr(src, "list refs", err)
	}
	p, err := makePlan(repo, refs, head)
	if err != nil {
		return p, nil, permanent(src, "resolve ref", err)
	}
	st := openStorage(stateDir, 16<<20)
	defer st.Close()
	switch {
	case p.commit != "" && p.fullCommit().IsZero(), p.commit == "" && p.ref == "":
		err = f.fetchAll(ctx, st, stateDir)
	default:
		err = f.fetchShallow(ctx, st, stateDir, p.ref, p.fullCommit())
	}
	if err != nil {
		return p, nil, cloneErr(src, "fetch", err)
	}
	st.ObjectStorage.Reindex()
	c, err := resolveCommit(st, p)
	if err != nil {
		return p, nil, cloneErr(src, "resolve commit", fmt.Errorf("%w", err))
	}
	return p, c, nil
}
