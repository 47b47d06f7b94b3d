package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/wrenchworks/wrench/task"
)

// Commit is a task's commit resolved in the repository's mirror, without a
// working tree: enough to read its configuration and manifests, key its
// environment, and send a sandbox that already holds an older commit the
// objects it lacks. It holds the mirror's lock shared until Close.
type Commit struct {
	m     *Manager
	mr    *mirror
	st    *filesystem.Storage
	c     *object.Commit
	flat  flatTree
	plan  plan
	src   source
	state string
}

// fetcherFor parses repo's URL and returns its source and the fetcher
// that reads it: over HTTPS with the credential for it, or a local
// repository. Errors are *CloneError.
func (m *Manager) fetcherFor(ctx context.Context, repo task.Repo, auth *Auth) (source, fetcher, error) {
	src, err := parseSource(repo.URL, !m.cfg.DisableLocal)
	if err != nil {
		return src, nil, permanent(src, "parse URL", err)
	}
	if src.kind == kindHTTPS {
		if auth, err = m.credentialFor(ctx, src, auth); err != nil {
			return src, nil, err
		}
		return src, newHTTPSFetcher(src, auth, m.cfg.CABundle), nil
	}
	lr, err := openLocal(src)
	if err != nil {
		return src, nil, permanent(src, "open", err)
	}
	return src, &localFetcher{repo: lr}, nil
}

// ErrNoMirror is returned by Resolve when the Manager has no MirrorDir.
var ErrNoMirror = errors.New("workspace: resolving a commit needs a mirror directory")

// Resolve makes sure the repository's mirror holds the commit repo asks for
// (fetching only when it does not) and returns it. Errors are *CloneError
// like Open's. Close releases the mirror.
func (m *Manager) Resolve(ctx context.Context, repo task.Repo, auth *Auth) (*Commit, error) {
	if m.cfg.MirrorDir == "" {
		return nil, ErrNoMirror
	}
	src, f, err := m.fetcherFor(ctx, repo, auth)
	if err != nil {
		return nil, err
	}
	mr, err := m.lockMirror(ctx, src)
	if err != nil {
		return nil, cloneErr(src, "lock mirror", err)
	}
	p, c, state, err := mr.sync(ctx, f, src, repo)
	if err != nil {
		mr.lock.unlock()
		return nil, err
	}
	if err := mr.lock.set(ctx, false); err != nil {
		mr.lock.unlock()
		return nil, cloneErr(src, "lock mirror", err)
	}
	st := openStorage(mr.repo, 32<<20)
	flat, err := flatten(st, c.TreeHash)
	if err != nil {
		st.Close()
		mr.lock.unlock()
		return nil, cloneErr(src, "read tree", err)
	}
	if state == "created" {
		m.mirrorMisses.Add(1)
	} else {
		m.mirrorHits.Add(1)
	}
	return &Commit{m: m, mr: mr, st: st, c: c, flat: flat, plan: p, src: src, state: state}, nil
}

// Clone makes a host workspace of the commit for taskID from the mirror
// (which Resolve already holds), as Open would.
func (c *Commit) Clone(ctx context.Context, taskID string) (*Workspace, error) {
	if c.mr == nil {
		return nil, errors.New("workspace: clone of a closed commit")
	}
	m := c.m
	w, err := m.newWorkspace(taskID, "")
	if err != nil {
		return nil, &CloneError{URL: c.src.display, Op: "create workspace", Retriable: true, Err: err}
	}
	if err := initBare(w.stateDir); err != nil {
		_ = w.Close()
		return nil, cloneErr(c.src, "create workspace", err)
	}
	w.info.Mirror = c.state
	pt := newPhaseTimer()
	if err := m.fill(ctx, w, c.src, c.plan, c.c, &mirrorSource{mr: c.mr}, pt); err != nil {
		_ = w.Close()
		return nil, err
	}
	return w, nil
}

// Close releases the mirror; it is idempotent.
func (c *Commit) Close() {
	if c.mr == nil {
		return
	}
	c.st.Close()
	c.mr.lock.unlock()
	c.mr = nil
}

// Hash is the commit's full sha.
func (c *Commit) Hash() string { return c.c.Hash.String() }

// Time is the commit's committer time.
func (c *Commit) Time() time.Time { return c.c.Committer.When }

// Mirror says what resolving did to the mirror: "created", "updated" or
// "reused".
func (c *Commit) Mirror() string { return c.state }

// Files returns the commit's regular files and symlinks with their blob
// hashes, keyed by slash-separated path.
func (c *Commit) Files() map[string]string {
	out := make(map[string]string, len(c.flat))
	for p, e := range c.flat {
		if e.Mode == filemode.Regular || e.Mode == filemode.Executable || e.Mode == filemode.Symlink {
			out[p] = e.Hash.String()
		}
	}
	return out
}

// ErrFileTooLarge is returned by ReadFile for a file over its limit.
var ErrFileTooLarge = errors.New("file too large")

// ReadFile returns the content of a regular file at the commit, or an
// error matching fs.ErrNotExist; a file over max bytes is ErrFileTooLarge.
func (c *Commit) ReadFile(p string, max int64) ([]byte, error) {
	e, ok := c.flat[path.Clean(p)]
	if !ok || (e.Mode != filemode.Regular && e.Mode != filemode.Executable) {
		return nil, fmt.Errorf("%s: %w", p, fs.ErrNotExist)
	}
	o, err := c.st.EncodedObject(plumbing.BlobObject, e.Hash)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if o.Size() > max {
		return nil, fmt.Errorf("%s is %d bytes, over %d: %w", p, o.Size(), max, ErrFileTooLarge)
	}
	r, err := o.Reader()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	defer r.Close()
	return io.ReadAll(io.LimitReader(r, max))
}

// Checkout describes how a working tree's .git should name the commit:
// the branch (or none: detached), the ref and the credential-free origin.
type Checkout struct {
	Commit string `json:"commit"`
	Branch string `json:"branch,omitempty"`
	// Ref and RefHash are the remote ref the commit came from (a branch's
	// remote-tracking ref or a tag), when known.
	Ref     string `json:"ref,omitempty"`
	RefHash string `json:"ref_hash,omitempty"`
	Origin  string `json:"origin"`
}

// Checkout returns how a working tree's .git names this commit.
func (c *Commit) Checkout() Checkout {
	return checkoutOf(gitDirFor(c.plan, c.c.Hash, c.src.display, c.st.HasEncodedObject))
}

func checkoutOf(g workGitDir) Checkout {
	out := Checkout{Commit: g.commit.String(), Branch: g.branch, Origin: g.originURL}
	for ref, h := range g.refs {
		out.Ref, out.RefHash = string(ref), h.String()
	}
	return out
}

// gitDir is the inverse of checkoutOf.
func (c Checkout) gitDir() workGitDir {
	g := workGitDir{commit: plumbing.NewHash(c.Commit), branch: c.Branch, originURL: c.Origin, refs: map[plumbing.ReferenceName]plumbing.Hash{}}
	if c.Ref != "" {
		g.refs[plumbing.ReferenceName(c.Ref)] = plumbing.NewHash(c.RefHash)
	}
	return g
}

// gitDirFor is what a working tree's .git says for commit h checked out
// according to plan p.
func gitDirFor(p plan, h plumbing.Hash, origin string, has func(plumbing.Hash) error) workGitDir {
	g := workGitDir{commit: h, originURL: origin, refs: map[plumbing.ReferenceName]plumbing.Hash{}}
	switch {
	case p.ref.IsBranch():
		g.branch = p.ref.Short()
		if has(p.refHash) == nil {
			g.refs[plumbing.NewRemoteReferenceName("origin", g.branch)] = p.refHash
		}
	case p.ref.IsTag():
		if has(p.refHash) == nil {
			g.refs[p.ref] = p.refHash
		}
	}
	return g
}

// Pack writes a git pack file holding every object reachable from the
// commit that is not reachable from have (commits a sandbox already holds
// with their whole history): the commits in between, and their trees and
// blobs that have's tree lacks. An unknown have is ignored (everything is
// sent). It returns the number of objects written.
func (c *Commit) Pack(ctx context.Context, w io.Writer, have []string) (int, error) {
	hashes, err := c.objectsSince(ctx, have)
	if err != nil {
		return 0, fmt.Errorf("pack: %w", err)
	}
	enc := packfile.NewEncoder(w, c.st, false)
	if _, err := enc.Encode(hashes, 10); err != nil {
		return 0, fmt.Errorf("pack: %w", err)
	}
	return len(hashes), nil
}

func (c *Commit) objectsSince(ctx context.Context, have []string) ([]plumbing.Hash, error) {
	haveCommits := map[plumbing.Hash]bool{}
	known := map[plumbing.Hash]bool{}
	for _, hs := range have {
		h := plumbing.NewHash(hs)
		hc, err := object.GetCommit(c.st, h)
		if err != nil {
			continue
		}
		if err := walkCommits(ctx, c.st, hc, haveCommits); err != nil {
			return nil, err
		}
		known[hc.TreeHash] = true
		flat, err := flatten(c.st, hc.TreeHash)
		if err != nil {
			return nil, err
		}
		for _, e := range flat {
			known[e.Hash] = true
		}
	}
	var out []plumbing.Hash
	added := map[plumbing.Hash]bool{}
	var addTree func(h plumbing.Hash) error
	addTree = func(h plumbing.Hash) error {
		if known[h] || added[h] {
			return nil
		}
		t, err := object.GetTree(c.st, h)
		if err != nil {
			return err
		}
		added[h] = true
		out = append(out, h)
		for _, e := range t.Entries {
			switch e.Mode {
			case filemode.Dir:
				if err := addTree(e.Hash); err != nil {
					return err
				}
			case filemode.Submodule:
			default:
				if !known[e.Hash] && !added[e.Hash] {
					added[e.Hash] = true
					out = append(out, e.Hash)
				}
			}
		}
		return nil
	}
	queue := []plumbing.Hash{c.c.Hash}
	for len(queue) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		h := queue[0]
		queue = queue[1:]
		if haveCommits[h] || added[h] {
			continue
		}
		cm, err := object.GetCommit(c.st, h)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			continue // beyond a shallow boundary
		} else if err != nil {
			return nil, err
		}
		added[h] = true
		out = append(out, h)
		if err := addTree(cm.TreeHash); err != nil {
			return nil, err
		}
		queue = append(queue, cm.ParentHashes...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// walkCommits adds every commit reachable from c to seen.
func walkCommits(ctx context.Context, st *filesystem.Storage, c *object.Commit, seen map[plumbing.Hash]bool) error {
	stack := []plumbing.Hash{c.Hash}
	for len(stack) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		h := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[h] {
			continue
		}
		seen[h] = true
		cm, err := object.GetCommit(st, h)
		if err != nil {
			continue
		}
		stack = append(stack, cm.ParentHashes...)
	}
	return nil
}
