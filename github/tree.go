package github

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"github.com/bluekeyes/go-gitdiff/gitdiff"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// applyPatch applies a git patch to base's tree in repo's object store and
// returns the new tree, with `git apply` semantics: every hunk must match
// exactly (no fuzz), a file to create must not exist and a file to change
// or delete must; deletions and renames are applied against the base tree
// as a whole. Text and binary (literal and delta) patches, modes, renames,
// copies and symlinks are supported; paths that leave the repository or
// touch .git are refused. No git binary and no working tree are needed.
func applyPatch(repo *git.Repository, base *object.Commit, patch string) (plumbing.Hash, error) {
	files, _, err := gitdiff.Parse(strings.NewReader(patch))
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("%w: parse: %w", ErrPatchDoesNotApply, err)
	}
	if len(files) == 0 {
		return plumbing.ZeroHash, fmt.Errorf("%w: no file changes in the patch", ErrPatchDoesNotApply)
	}
	baseTree, err := base.Tree()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read base tree: %w", err)
	}
	entries, err := flatten(baseTree)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	type change struct {
		name string
		mode filemode.FileMode
		hash plumbing.Hash
	}
	// Deletions and renames free their paths for the whole patch, as in
	// git apply.
	removed := map[string]bool{}
	for _, f := range files {
		if f.IsDelete || f.IsRename {
			removed[f.OldName] = true
		}
	}
	var sets []change
	seen := map[string]bool{}
	for _, f := range files {
		fail := func(format string, args ...any) error {
			return fmt.Errorf("%w: %s: %s", ErrPatchDoesNotApply, f.String(), fmt.Sprintf(format, args...))
		}
		for _, n := range []string{f.OldName, f.NewName} {
			if n != "" && !safePath(n) {
				return plumbing.ZeroHash, fail("unsafe path %q", n)
			}
		}
		// A path may be deleted and created again (a file becoming a
		// symlink), but not written twice.
		target := "+" + f.NewName
		if f.IsDelete {
			target = "-" + f.OldName
		}
		if seen[target] {
			return plumbing.ZeroHash, fail("%s is patched twice", target[1:])
		}
		seen[target] = true

		var src []byte
		mode := filemode.Regular
		if !f.IsNew {
			old, ok := entries[f.OldName]
			if !ok {
				return plumbing.ZeroHash, fail("%s does not exist in the base", f.OldName)
			}
			if old.Mode == filemode.Submodule {
				return plumbing.ZeroHash, fail("%s is a submodule", f.OldName)
			}
			if src, err = readBlob(repo, old.Hash); err != nil {
				return plumbing.ZeroHash, err
			}
			mode = old.Mode
		}
		if f.IsDelete {
			continue
		}
		if _, exists := entries[f.NewName]; exists && (f.IsNew || f.IsRename || f.IsCopy) && !removed[f.NewName] {
			return plumbing.ZeroHash, fail("%s already exists in the base", f.NewName)
		}
		if f.NewMode != 0 {
			if mode, err = gitMode(uint32(f.NewMode)); err != nil {
				return plumbing.ZeroHash, fail("%v", err)
			}
		}
		out := src
		if len(f.TextFragments) > 0 || f.IsBinary {
			var buf bytes.Buffer
			if err := gitdiff.Apply(&buf, bytes.NewReader(src), f); err != nil {
				return plumbing.ZeroHash, fail("%v", err)
			}
			out = buf.Bytes()
		}
		h, err := writeBlob(repo, out)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		sets = append(sets, change{name: f.NewName, mode: mode, hash: h})
	}
	for n := range removed {
		delete(entries, n)
	}
	for _, c := range sets {
		entries[c.name] = object.TreeEntry{Name: path.Base(c.name), Mode: c.mode, Hash: c.hash}
	}
	return writeTree(repo, entries)
}

// gitMode maps a patch's mode to a tree entry mode.
func gitMode(m uint32) (filemode.FileMode, error) {
	switch filemode.FileMode(m) {
	case filemode.Regular, filemode.Deprecated:
		return filemode.Regular, nil
	case filemode.Executable:
		return filemode.Executable, nil
	case filemode.Symlink:
		return filemode.Symlink, nil
	}
	return 0, fmt.Errorf("unsupported mode %o", m)
}

// safePath refuses absolute paths, empty, "." and ".." components, and any
// .git component (in any case).
func safePath(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\x00") {
		return false
	}
	for c := range strings.SplitSeq(p, "/") {
		if c == "" || c == "." || c == ".." || strings.EqualFold(c, ".git") {
			return false
		}
	}
	return true
}

// flatten lists every non-tree entry of t by its full path.
func flatten(t *object.Tree) (map[string]object.TreeEntry, error) {
	out := map[string]object.TreeEntry{}
	w := object.NewTreeWalker(t, true, nil)
	defer w.Close()
	for {
		name, e, err := w.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("walk base tree: %w", err)
		}
		if e.Mode != filemode.Dir {
			out[name] = e
		}
	}
}

func readBlob(repo *git.Repository, h plumbing.Hash) ([]byte, error) {
	b, err := repo.BlobObject(h)
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	r, err := b.Reader()
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	defer r.Close()
	return io.ReadAll(r)
}

func writeBlob(repo *git.Repository, data []byte) (plumbing.Hash, error) {
	obj := repo.Storer.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	w, err := obj.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if _, err := w.Write(data); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	return repo.Storer.SetEncodedObject(obj)
}

// writeTree stores the trees for a flat path → entry map and returns the
// root's hash.
func writeTree(repo *git.Repository, entries map[string]object.TreeEntry) (plumbing.Hash, error) {
	type dir struct {
		files map[string]object.TreeEntry
		dirs  map[string]*dir
	}
	newDir := func() *dir { return &dir{files: map[string]object.TreeEntry{}, dirs: map[string]*dir{}} }
	root := newDir()
	for p, e := range entries {
		d := root
		parts := strings.Split(p, "/")
		for _, c := range parts[:len(parts)-1] {
			if _, clash := d.files[c]; clash {
				return plumbing.ZeroHash, fmt.Errorf("%w: %s is both a file and a directory", ErrPatchDoesNotApply, c)
			}
			if d.dirs[c] == nil {
				d.dirs[c] = newDir()
			}
			d = d.dirs[c]
		}
		name := parts[len(parts)-1]
		if _, clash := d.dirs[name]; clash {
			return plumbing.ZeroHash, fmt.Errorf("%w: %s is both a file and a directory", ErrPatchDoesNotApply, p)
		}
		e.Name = name
		d.files[name] = e
	}
	var write func(d *dir) (plumbing.Hash, error)
	write = func(d *dir) (plumbing.Hash, error) {
		var t object.Tree
		for _, e := range d.files {
			t.Entries = append(t.Entries, e)
		}
		for name, sub := range d.dirs {
			h, err := write(sub)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			t.Entries = append(t.Entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
		}
		// Git orders entries by name, a tree's name compared as if it
		// ended in "/".
		key := func(e object.TreeEntry) string {
			if e.Mode == filemode.Dir {
				return e.Name + "/"
			}
			return e.Name
		}
		sort.Slice(t.Entries, func(i, j int) bool { return key(t.Entries[i]) < key(t.Entries[j]) })
		obj := repo.Storer.NewEncodedObject()
		if err := t.Encode(obj); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("encode tree: %w", err)
		}
		return repo.Storer.SetEncodedObject(obj)
	}
	return write(root)
}
