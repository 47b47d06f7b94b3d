package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/objfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/memory"
)

// A local source (a path or file:// URL) is read directly from its object
// directory, without git-upload-pack (which the service's image does not
// ship) and without building a pack: its packs are copied, its loose
// objects packed into one new pack, and its refs read from disk.

// localRepo is a repository on this host.
type localRepo struct {
	src source
	// gitDir holds HEAD; commonDir holds objects and refs (they differ for
	// a linked worktree).
	gitDir, commonDir string
}

// openLocal finds the git directory of a local path: a working tree's .git
// directory, the directory a .git file points to, or a bare repository.
func openLocal(src source) (*localRepo, error) {
	p := src.path
	notRepo := fmt.Errorf("%w: %s", ErrNotRepository, p)
	fi, err := os.Stat(p)
	if err != nil || !fi.IsDir() {
		return nil, notRepo
	}
	gitDir := p
	dotgit := filepath.Join(p, ".git")
	if fi, err := os.Lstat(dotgit); err == nil {
		switch {
		case fi.IsDir():
			gitDir = dotgit
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(dotgit)
			if err != nil || !strings.HasPrefix(string(data), "gitdir:") {
				return nil, notRepo
			}
			gitDir = strings.TrimSpace(strings.TrimPrefix(string(data), "gitdir:"))
			if !filepath.IsAbs(gitDir) {
				gitDir = filepath.Join(p, gitDir)
			}
		}
	}
	commonDir := gitDir
	if data, err := os.ReadFile(filepath.Join(gitDir, "commondir")); err == nil {
		commonDir = strings.TrimSpace(string(data))
		if !filepath.IsAbs(commonDir) {
			commonDir = filepath.Join(gitDir, commonDir)
		}
	}
	for _, need := range []string{filepath.Join(gitDir, "HEAD"), filepath.Join(commonDir, "objects"), filepath.Join(commonDir, "refs")} {
		if _, err := os.Stat(need); err != nil {
			return nil, notRepo
		}
	}
	return &localRepo{src: src, gitDir: gitDir, commonDir: commonDir}, nil
}

// refs lists the repository's branches and tags and its HEAD.
func (l *localRepo) refs(context.Context) (map[plumbing.ReferenceName]plumbing.Hash, *plumbing.Reference, error) {
	st := openStorage(l.commonDir, 1<<20)
	defer st.Close()
	iter, err := st.IterReferences()
	if err != nil {
		return nil, nil, fmt.Errorf("read refs: %w", err)
	}
	refs := map[plumbing.ReferenceName]plumbing.Hash{}
	err = iter.ForEach(func(r *plumbing.Reference) error {
		if r.Type() == plumbing.HashReference && (r.Name().IsBranch() || r.Name().IsTag()) {
			refs[r.Name()] = r.Hash()
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read refs: %w", err)
	}
	data, err := os.ReadFile(filepath.Join(l.gitDir, "HEAD"))
	if err != nil {
		return nil, nil, fmt.Errorf("read HEAD: %w", err)
	}
	head := strings.TrimSpace(string(data))
	var h *plumbing.Reference
	if t, ok := strings.CutPrefix(head, "ref:"); ok {
		h = plumbing.NewSymbolicReference(plumbing.HEAD, plumbing.ReferenceName(strings.TrimSpace(t)))
	} else if plumbing.IsHash(head) {
		h = plumbing.NewHashReference(plumbing.HEAD, plumbing.NewHash(head))
	}
	return refs, h, nil
}

// objectDirs is the repository's object directory and its alternates
// (recursively, at most a few levels, as git does).
func (l *localRepo) objectDirs() []string {
	var out []string
	seen := map[string]bool{}
	var add func(dir string, depth int)
	add = func(dir string, depth int) {
		dir = filepath.Clean(dir)
		if seen[dir] || depth > 5 {
			return
		}
		seen[dir] = true
		out = append(out, dir)
		data, err := os.ReadFile(filepath.Join(dir, "info", "alternates"))
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if !filepath.IsAbs(line) {
				line = filepath.Join(dir, line)
			}
			add(line, depth+1)
		}
	}
	add(filepath.Join(l.commonDir, "objects"), 0)
	return out
}

// copyInto makes every object of the repository available in the bare
// repository at dstDir (opened as dst): packs it lacks are copied, loose
// objects it lacks are packed into one new pack.
func (l *localRepo) copyInto(ctx context.Context, dst *filesystem.Storage, dstDir string) error {
	packDir := filepath.Join(dstDir, "objects", "pack")
	loose := map[plumbing.Hash]string{} // hash -> object directory
	for _, objDir := range l.objectDirs() {
		des, err := os.ReadDir(filepath.Join(objDir, "pack"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("list packs: %w", err)
		}
		for _, de := range des {
			name := de.Name()
			if !strings.HasPrefix(name, "pack-") || !strings.HasSuffix(name, ".pack") {
				continue
			}
			base := strings.TrimSuffix(name, ".pack")
			if _, err := os.Stat(filepath.Join(packDir, base+".idx")); err == nil {
				continue
			}
			if _, err := os.Stat(filepath.Join(objDir, "pack", base+".idx")); err != nil {
				continue // a pack being written
			}
			// The .pack first, then the .idx that makes it visible.
			for _, ext := range []string{".pack", ".idx"} {
				if err := ctx.Err(); err != nil {
					return err
				}
				if err := copyFile(filepath.Join(objDir, "pack", base+ext), filepath.Join(packDir, base+ext), 0o444); err != nil {
					return fmt.Errorf("copy pack: %w", err)
				}
			}
		}
		subs, err := os.ReadDir(objDir)
		if err != nil {
			return fmt.Errorf("list objects: %w", err)
		}
		for _, sub := range subs {
			if len(sub.Name()) != 2 || !sub.IsDir() || !isHex(sub.Name()) {
				continue
			}
			files, err := os.ReadDir(filepath.Join(objDir, sub.Name()))
			if err != nil {
				return fmt.Errorf("list objects: %w", err)
			}
			for _, f := range files {
				if len(f.Name()) == 38 && isHex(f.Name()) {
					h := plumbing.NewHash(sub.Name() + f.Name())
					if _, ok := loose[h]; !ok {
						loose[h] = objDir
					}
				}
			}
		}
	}
	dst.ObjectStorage.Reindex()
	var missing []plumbing.Hash
	for h := range loose {
		if dst.HasEncodedObject(h) != nil {
			missing = append(missing, h)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	w, err := dst.PackfileWriter()
	if err != nil {
		return fmt.Errorf("pack loose objects: %w", err)
	}
	src := looseStore{EncodedObjectStorer: memory.NewStorage(), where: loose}
	if _, err := packfile.NewEncoder(w, src, false).Encode(missing, 0); err != nil {
		w.Close()
		return fmt.Errorf("pack loose objects: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("pack loose objects: %w", err)
	}
	dst.ObjectStorage.Reindex()
	return nil
}

// looseStore reads loose objects from the object directories they were
// found in (a repository's own and its alternates'). Only EncodedObject is
// used, by the pack encoder.
type looseStore struct {
	storer.EncodedObjectStorer
	where map[plumbing.Hash]string
}

func (s looseStore) EncodedObject(_ plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	dir, ok := s.where[h]
	if !ok {
		return nil, plumbing.ErrObjectNotFound
	}
	hex := h.String()
	f, err := os.Open(filepath.Join(dir, hex[:2], hex[2:]))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := objfile.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("read object %s: %w", h, err)
	}
	defer r.Close()
	typ, size, err := r.Header()
	if err != nil {
		return nil, fmt.Errorf("read object %s: %w", h, err)
	}
	o := &plumbing.MemoryObject{}
	o.SetType(typ)
	o.SetSize(size)
	if _, err := io.Copy(o, r); err != nil {
		return nil, fmt.Errorf("read object %s: %w", h, err)
	}
	if o.Hash() != h {
		return nil, fmt.Errorf("object %s is corrupt", h)
	}
	return o, nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// copyFile copies src to dst (through a temporary name, so dst appears
// whole) and sets its permissions.
func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(tmp)
		return err
	}
	if err := out.Chmod(perm); err != nil {
		out.Close()
		os.Remove(tmp)
		return err
	}
	if err := out.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, dst)
}
