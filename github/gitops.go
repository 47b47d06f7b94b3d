package github

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// gitWork makes the pull request's commit and pushes its branch. Objects
// live in a bare repository: a cached one per remote under CacheDir
// (fetched incrementally, one publish at a time per remote in this
// process), or a temporary one removed afterwards. No working tree is
// checked out: the patch is applied to an index built from the base
// commit with `git apply --cached`, so a publish costs a fetch, not a
// checkout.
type gitWork struct {
	token    string
	caBundle []byte
	cacheDir string
	author   string
	email    string

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// commitSpec is what to commit.
type commitSpec struct {
	cloneURL string
	base     string // full sha
	branch   string // base branch, fetched to find base
	patch    string
	message  string
	when     time.Time
	head     string // the branch to push, e.g. "wrench/<task id>"
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
	auth := &githttp.BasicAuth{Username: "x-access-token", Password: g.token}
	base := plumbing.NewHash(spec.base)
	if err := g.fetchBase(ctx, repo, remote, auth, base, spec.branch); err != nil {
		return "", err
	}
	sha, err := g.commit(ctx, dir, spec)
	if err != nil {
		return "", err
	}
	local := plumbing.ReferenceName("refs/heads/" + spec.head)
	if err := repo.Storer.SetReference(plumbing.NewHashReference(local, plumbing.NewHash(sha))); err != nil {
		return "", fmt.Errorf("set %s: %w", local, err)
	}
	defer func() { _ = repo.Storer.RemoveReference(local) }()
	err = remote.PushContext(ctx, &git.PushOptions{
		RemoteName: "origin",
		RefSpecs:   []config.RefSpec{config.RefSpec("+" + local.String() + ":" + local.String())},
		Auth:       auth,
		CABundle:   g.caBundle,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return "", fmt.Errorf("push %s to %s: %w", spec.head, spec.cloneURL, err)
	}
	return sha, nil
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

// commit builds the patched tree with the git CLI (read-tree, apply
// --cached, write-tree, commit-tree) in the bare repository dir.
func (g *gitWork) commit(ctx context.Context, dir string, spec commitSpec) (string, error) {
	tmp, err := os.MkdirTemp("", "wrench-publish-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	date := strconv.FormatInt(spec.when.Unix(), 10) + " +0000"
	env := append(os.Environ(),
		"GIT_DIR="+dir, "GIT_INDEX_FILE="+filepath.Join(tmp, "index"),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME="+g.author, "GIT_AUTHOR_EMAIL="+g.email, "GIT_AUTHOR_DATE="+date,
		"GIT_COMMITTER_NAME="+g.author, "GIT_COMMITTER_EMAIL="+g.email, "GIT_COMMITTER_DATE="+date)
	run := func(stdin string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = tmp
		cmd.Env = env
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("git %s: %w: %s", args[0], err, strings.TrimSpace(errb.String()))
		}
		return strings.TrimSpace(out.String()), nil
	}
	if _, err := run("", "read-tree", spec.base); err != nil {
		return "", err
	}
	if _, err := run(spec.patch, "apply", "--cached", "--whitespace=nowarn", "-"); err != nil {
		return "", fmt.Errorf("%w on %s: %w", ErrPatchDoesNotApply, short(spec.base), err)
	}
	tree, err := run("", "write-tree")
	if err != nil {
		return "", err
	}
	baseTree, err := run("", "rev-parse", spec.base+"^{tree}")
	if err != nil {
		return "", err
	}
	if tree == baseTree {
		return "", fmt.Errorf("%w: it changes nothing on %s", ErrPatchDoesNotApply, short(spec.base))
	}
	return run(spec.message, "commit-tree", tree, "-p", spec.base)
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
