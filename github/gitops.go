package github

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// gitWork makes the pull request's commit and pushes its branch. Objects
// live in a bare repository: a cached one per remote under CacheDir
// (fetched incrementally, one publish at a time per remote in this
// process), or a temporary one removed afterwards. No working tree is
// checked out and no git binary is needed: the patch is applied to the
// base commit's tree in the object store (see applyPatch), so a publish
// costs a fetch, not a checkout.
type gitWork struct {
	tokens   TokenSource
	caBundle []byte
	cacheDir string
	author   string
	email    string

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// commitSpec is what to commit.
type commitSpec struct {
	owner    string // the repository, for its token
	repo     string
	cloneURL string
	base     string // full sha
	branch   string // base branch, fetched to find base
	patch    string
	message  string
	when     time.Time
	head     string // the branch to push, e.g. "wrench/<task id>"
	// force replaces head whatever it points at; without it the push
	// must fast-forward head (a follow-up commit on a pull request).
	force bool
}

// push applies spec.patch on spec.base, commits, and force-pushes the
// commit to spec.head. It returns the commit's sha. The commit is
// deterministic (its dates are spec.when), so publishing the same result
// again pushes the same commit.
func (g *gitWork) push(ctx context.Context, spec commitSpec) (string, error) {
	dir, release, err := g.repoDir(spec.cloneURL)
	if err != nil {
		return "", err
	}
	defer release()
	repo, err := git.PlainOpen(dir)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		repo, err = git.PlainInit(dir, true)
	}
	if err != nil {
		return "", fmt.Errorf("open %s: %w", dir, err)
	}
	remote := git.NewRemote(repo.Storer, &config.RemoteConfig{Name: "origin", URLs: []string{spec.cloneURL}})
	tok, err := g.tokens.Token(ctx, spec.owner, spec.repo)
	if err != nil {
		return "", err
	}
	full := spec.owner + "/" + spec.repo
	if err := checkPermission(tok, full, "push a branch", "contents", Write); err != nil {
		return "", err
	}
	auth := &githttp.BasicAuth{Username: "x-access-token", Password: tok.Value}
	base := plumbing.NewHash(spec.base)
	if err := g.fetchBase(ctx, repo, remote, auth, base, spec.branch); err != nil {
		return "", g.explain(err, tok, full, "fetch", Read)
	}
	sha, err := g.commit(repo, spec)
	if err != nil {
		return "", err
	}
	local := plumbing.ReferenceName("refs/heads/" + spec.head)
	if err := repo.Storer.SetReference(plumbing.NewHashReference(local, plumbing.NewHash(sha))); err != nil {
		return "", fmt.Errorf("set %s: %w", local, err)
	}
	defer func() { _ = repo.Storer.RemoveReference(local) }()
	plus := ""
	if spec.force {
		plus = "+"
	}
	pushOnce := func(auth *githttp.BasicAuth) error {
		return remote.PushContext(ctx, &git.PushOptions{
			RemoteName: "origin",
			RefSpecs:   []config.RefSpec{config.RefSpec(plus + local.String() + ":" + local.String())},
			Auth:       auth,
			CABundle:   g.caBundle,
		})
	}
	err = pushOnce(auth)
	if errors.Is(err, transport.ErrAuthenticationRequired) {
		// The token expired or was revoked since it was handed out: once
		// more with a fresh one.
		if f, ok := g.tokens.(forgetter); ok {
			f.Forget(spec.owner, spec.repo, tok.Value)
			if tok, err = g.tokens.Token(ctx, spec.owner, spec.repo); err != nil {
				return "", err
			}
			err = pushOnce(&githttp.BasicAuth{Username: "x-access-token", Password: tok.Value})
		}
	}
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return "", g.explain(fmt.Errorf("push %s to %s: %w", spec.head, spec.cloneURL, err), tok, full, "push a branch", Write)
	}
	return sha, nil
}

// explain turns git's 403 into a *PermissionError naming contents; other
// errors are returned as they are.
func (g *gitWork) explain(err error, tok Token, full, op, level string) error {
	if !errors.Is(err, transport.ErrAuthorizationFailed) {
		return err
	}
	have := "unknown (a personal token)"
	if tok.Permissions != nil {
		have = tok.Permissions["contents"]
	}
	return errors.Join(&PermissionError{Repo: full, Op: op, Permission: "contents", Level: level, Have: have}, err)
}

// fetchBase makes sure base is in repo: first from the base branch, then
// from every branch.
func (g *gitWork) fetchBase(ctx context.Context, repo *git.Repository, remote *git.Remote, auth *githttp.BasicAuth, base plumbing.Hash, branch string) error {
	has := func() bool { _, err := repo.CommitObject(base); return err == nil }
	if has() {
		return nil
	}
	specs := [][]config.RefSpec{
		{config.RefSpec("+refs/heads/" + branch + ":refs/remotes/origin/" + branch)},
		{"+refs/heads/*:refs/remotes/origin/*"},
	}
	for _, rs := range specs {
		err := remote.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", RefSpecs: rs, Auth: auth,
			CABundle: g.caBundle, Tags: git.NoTags})
		if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
			return fmt.Errorf("fetch %s: %w", remote.Config().URLs[0], err)
		}
		if has() {
			return nil
		}
	}
	return fmt.Errorf("%w: %s in %s", ErrBaseNotFound, base, remote.Config().URLs[0])
}

// commit applies spec.patch to spec.base and stores the commit, whose
// author and committer dates are spec.when.
func (g *gitWork) commit(repo *git.Repository, spec commitSpec) (string, error) {
	base, err := repo.CommitObject(plumbing.NewHash(spec.base))
	if err != nil {
		return "", fmt.Errorf("read base commit %s: %w", short(spec.base), err)
	}
	tree, err := applyPatch(repo, base, spec.patch)
	if err != nil {
		return "", fmt.Errorf("apply on %s: %w", short(spec.base), err)
	}
	if tree == base.TreeHash {
		return "", fmt.Errorf("%w: it changes nothing on %s", ErrPatchDoesNotApply, short(spec.base))
	}
	sig := object.Signature{Name: g.author, Email: g.email, When: spec.when.UTC()}
	c := &object.Commit{Author: sig, Committer: sig, Message: spec.message, TreeHash: tree,
		ParentHashes: []plumbing.Hash{base.Hash}}
	obj := repo.Storer.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return "", fmt.Errorf("encode commit: %w", err)
	}
	h, err := repo.Storer.SetEncodedObject(obj)
	if err != nil {
		return "", fmt.Errorf("store commit: %w", err)
	}
	return h.String(), nil
}

// repoDir returns the bare repository to work in for cloneURL and a
// function that releases it (unlocking a cached one, removing a temporary
// one).
func (g *gitWork) repoDir(cloneURL string) (string, func(), error) {
	if g.cacheDir == "" {
		dir, err := os.MkdirTemp("", "wrench-publish-repo-")
		if err != nil {
			return "", nil, err
		}
		return dir, func() { _ = os.RemoveAll(dir) }, nil
	}
	dir := filepath.Join(g.cacheDir, cacheName(cloneURL))
	if err := os.MkdirAll(g.cacheDir, 0o700); err != nil {
		return "", nil, err
	}
	g.mu.Lock()
	if g.locks == nil {
		g.locks = map[string]*sync.Mutex{}
	}
	l := g.locks[dir]
	if l == nil {
		l = &sync.Mutex{}
		g.locks[dir] = l
	}
	g.mu.Unlock()
	l.Lock()
	return dir, l.Unlock, nil
}

// cacheName is a directory name for a clone URL: its host and path with
// anything unusual replaced.
func cacheName(cloneURL string) string {
	s := strings.TrimPrefix(strings.ToLower(cloneURL), "https://")
	var b strings.Builder
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
			b.WriteRune(c)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// short abbreviates a sha for messages.
func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
