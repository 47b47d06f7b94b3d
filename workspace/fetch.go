package workspace

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/wrenchworks/wrench/task"
)

// fetcher brings a source's objects into a bare repository on this host.
type fetcher interface {
	// refs lists the source's branches and tags, and its HEAD.
	refs(ctx context.Context) (map[plumbing.ReferenceName]plumbing.Hash, *plumbing.Reference, error)
	// fetchAll fetches every branch and tag with full history and sets
	// them in dst.
	fetchAll(ctx context.Context, dst *filesystem.Storage, dstDir string) error
	// fetchShallow fetches what is needed to check out ref (a full ref
	// name) or commit (a full sha), shallowly where the transport allows.
	fetchShallow(ctx context.Context, dst *filesystem.Storage, dstDir string, ref plumbing.ReferenceName, commit plumbing.Hash) error
}

// mirrorSpecs are the refs a mirror keeps: branches and tags (not pull
// requests or other hosting refs).
var mirrorSpecs = []config.RefSpec{"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"}

// httpsFetcher uses go-git's smart HTTP transport.
type httpsFetcher struct {
	src      source
	auth     transport.AuthMethod
	caBundle []byte
}

func newHTTPSFetcher(src source, auth *Auth, caBundle []byte) *httpsFetcher {
	f := &httpsFetcher{src: src, caBundle: caBundle}
	switch {
	case src.user != nil:
		pw, _ := src.user.Password()
		f.auth = &githttp.BasicAuth{Username: src.user.Username(), Password: pw}
	case auth != nil && auth.Token != "":
		f.auth = &githttp.BasicAuth{Username: "x-access-token", Password: auth.Token}
	}
	return f
}

// remote is an anonymous remote for the source, storing into st (nil for
// listing only).
func (f *httpsFetcher) remote(st *filesystem.Storage) *git.Remote {
	rc := &config.RemoteConfig{Name: "origin", URLs: []string{f.src.fetchURL}}
	if st == nil {
		return git.NewRemote(memory.NewStorage(), rc)
	}
	return git.NewRemote(st, rc)
}

func (f *httpsFetcher) refs(ctx context.Context) (map[plumbing.ReferenceName]plumbing.Hash, *plumbing.Reference, error) {
	list, err := f.remote(nil).ListContext(ctx, &git.ListOptions{Auth: f.auth, CABundle: f.caBundle})
	if err != nil {
		return nil, nil, err
	}
	refs := map[plumbing.ReferenceName]plumbing.Hash{}
	var head *plumbing.Reference
	for _, r := range list {
		switch {
		case r.Name() == plumbing.HEAD:
			head = r
		case r.Type() == plumbing.HashReference && (r.Name().IsBranch() || r.Name().IsTag()):
			refs[r.Name()] = r.Hash()
		}
	}
	return refs, head, nil
}

func (f *httpsFetcher) fetch(ctx context.Context, dst *filesystem.Storage, specs []config.RefSpec, depth int) error {
	err := f.remote(dst).FetchContext(ctx, &git.FetchOptions{
		RefSpecs: specs,
		Depth:    depth,
		Auth:     f.auth,
		CABundle: f.caBundle,
		Tags:     git.NoTags,
		Force:    true,
		Progress: ProgressOf(ctx),
	})
	if errors.Is(err, git.NoErrAlreadyUpToDate) {
		return nil
	}
	return err
}

func (f *httpsFetcher) fetchAll(ctx context.Context, dst *filesystem.Storage, _ string) error {
	return f.fetch(ctx, dst, mirrorSpecs, 0)
}

func (f *httpsFetcher) fetchShallow(ctx context.Context, dst *filesystem.Storage, _ string, ref plumbing.ReferenceName, commit plumbing.Hash) error {
	if !commit.IsZero() {
		// Servers that allow it send one commit by its sha; otherwise fetch
		// everything and look for it.
		err := f.fetch(ctx, dst, []config.RefSpec{config.RefSpec(commit.String() + ":refs/wrench/want")}, 1)
		if err == nil {
			return nil
		}
		if _, retriable := classify(err); retriable && !errors.Is(err, git.ErrExactSHA1NotSupported) &&
			!strings.Contains(err.Error(), "not our ref") {
			return err
		}
		return f.fetchAll(ctx, dst, "")
	}
	return f.fetch(ctx, dst, []config.RefSpec{config.RefSpec("+" + ref.String() + ":" + ref.String())}, 1)
}

// localFetcher copies a local repository's objects; there is nothing to
// gain from shallow copies on the same disk.
type localFetcher struct{ repo *localRepo }

func (f *localFetcher) refs(ctx context.Context) (map[plumbing.ReferenceName]plumbing.Hash, *plumbing.Reference, error) {
	return f.repo.refs(ctx)
}

func (f *localFetcher) fetchAll(ctx context.Context, dst *filesystem.Storage, dstDir string) error {
	if err := f.repo.copyInto(ctx, dst, dstDir); err != nil {
		return err
	}
	refs, _, err := f.repo.refs(ctx)
	if err != nil {
		return err
	}
	for name, h := range refs {
		if err := dst.SetReference(plumbing.NewHashReference(name, h)); err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
	}
	return nil
}

func (f *localFetcher) fetchShallow(ctx context.Context, dst *filesystem.Storage, dstDir string, _ plumbing.ReferenceName, _ plumbing.Hash) error {
	return f.fetchAll(ctx, dst, dstDir)
}

// plan is what a task asks for, resolved against the source's refs.
type plan struct {
	// ref is the full name of the task's ref (or of the default branch);
	// "" when the checkout is a detached commit.
	ref plumbing.ReferenceName
	// refHash is the source's value of ref (a tag object for an annotated
	// tag).
	refHash plumbing.Hash
	// commit is the task's commit, possibly abbreviated; "" means the
	// ref's tip.
	commit string
}

// makePlan resolves repo's ref against the source's refs: a full ref name,
// then a branch, then a tag; no ref means the default branch (HEAD).
func makePlan(repo task.Repo, refs map[plumbing.ReferenceName]plumbing.Hash, head *plumbing.Reference) (plan, error) {
	p := plan{commit: strings.ToLower(strings.TrimSpace(repo.Commit))}
	if p.commit != "" && (len(p.commit) < 4 || len(p.commit) > 40 || !isHex(p.commit)) {
		return p, fmt.Errorf("%w: %q is not a commit sha", ErrCommitNotFound, repo.Commit)
	}
	if ref := strings.TrimSpace(repo.Ref); ref != "" {
		for _, cand := range []plumbing.ReferenceName{
			plumbing.ReferenceName(ref), plumbing.NewBranchReferenceName(ref), plumbing.NewTagReferenceName(ref),
		} {
			if h, ok := refs[cand]; ok {
				p.ref, p.refHash = cand, h
				return p, nil
			}
		}
		return p, fmt.Errorf("%w: %q is not a branch or tag", ErrRefNotFound, ref)
	}
	if p.commit != "" {
		return p, nil // a pinned commit without a ref is checked out detached
	}
	if head != nil && head.Type() == plumbing.SymbolicReference {
		if h, ok := refs[head.Target()]; ok {
			p.ref, p.refHash = head.Target(), h
			return p, nil
		}
	}
	if head != nil && head.Type() == plumbing.HashReference {
		p.refHash = head.Hash()
		return p, nil
	}
	if len(refs) == 0 {
		return p, ErrEmptyRepository
	}
	return p, fmt.Errorf("%w: the repository has no default branch; name a ref", ErrRefNotFound)
}

// fullCommit returns the plan's commit as a hash when it is a full sha.
func (p plan) fullCommit() plumbing.Hash {
	if len(p.commit) == 40 {
		return plumbing.NewHash(p.commit)
	}
	return plumbing.ZeroHash
}

// resolveCommit finds the commit to check out in st: the plan's commit
// (expanding an abbreviation) or the ref's value, peeling tags.
func resolveCommit(st *filesystem.Storage, p plan) (*object.Commit, error) {
	h := p.refHash
	if p.commit != "" {
		even := p.commit[:len(p.commit)&^1]
		prefix, _ := hex.DecodeString(even)
		cands, err := st.HashesWithPrefix(prefix)
		if err != nil {
			return nil, err
		}
		var match []plumbing.Hash
		for _, c := range cands {
			if strings.HasPrefix(c.String(), p.commit) {
				match = append(match, c)
			}
		}
		switch len(match) {
		case 0:
			return nil, fmt.Errorf("%w: %s", ErrCommitNotFound, p.commit)
		case 1:
			h = match[0]
		default:
			return nil, fmt.Errorf("%w: %s is ambiguous", ErrCommitNotFound, p.commit)
		}
	}
	for range 10 {
		o, err := st.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrCommitNotFound, h, err)
		}
		switch o.Type() {
		case plumbing.CommitObject:
			return object.DecodeCommit(st, o)
		case plumbing.TagObject:
			t, err := object.DecodeTag(st, o)
			if err != nil {
				return nil, err
			}
			h = t.Target
		default:
			return nil, fmt.Errorf("%w: %s is a %s", ErrCommitNotFound, h, o.Type())
		}
	}
	return nil, fmt.Errorf("%w: tag chain too long at %s", ErrCommitNotFound, h)
}
