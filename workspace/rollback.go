package workspace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// kind groups modes that can be changed into each other in place.
func kind(m filemode.FileMode) int {
	switch m {
	case filemode.Regular, filemode.Executable, filemode.Deprecated:
		return 1
	case filemode.Symlink:
		return 2
	case filemode.Dir:
		return 3
	case filemode.Submodule:
		return 4
	}
	return 0
}

// restore turns the working tree described by cur (a fresh snapshot) into
// target. All file operations go through an os.Root on the working tree,
// so a symlink planted in the tree is replaced, never followed.
func (w *Workspace) restore(ctx context.Context, cur, target flatTree) error {
	root, err := os.OpenRoot(w.repoDir)
	if err != nil {
		return fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()

	// Removals, deepest first: what the target lacks, and what changes kind.
	var removals []string
	for p, ce := range cur {
		if te, ok := target[p]; !ok || kind(te.Mode) != kind(ce.Mode) {
			removals = append(removals, p)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(removals)))
	for _, p := range removals {
		if err := ctx.Err(); err != nil {
			return err
		}
		delete(w.stat, p)
		ce := cur[p]
		_, replaced := target[p]
		switch {
		case ce.Mode == filemode.Submodule:
			continue
		case ce.isDir() && replaced:
			err = root.RemoveAll(p)
		case ce.isDir():
			// Ignored files the checkpoint does not record keep their
			// directory.
			if err = root.Remove(p); isNotEmpty(err) {
				err = nil
			}
		default:
			err = root.Remove(p)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", p, err)
		}
	}

	// Creations and updates, parents first.
	for _, p := range target.sortedPaths() {
		if err := ctx.Err(); err != nil {
			return err
		}
		te := target[p]
		ce, ok := cur[p]
		if ok && ce == te {
			continue
		}
		switch te.Mode {
		case filemode.Dir, filemode.Submodule:
			err = w.ensureDir(root, p)
		case filemode.Symlink:
			err = w.restoreSymlink(root, p, te.Hash)
		default:
			if ok && kind(ce.Mode) == 1 && ce.Hash == te.Hash {
				err = w.restoreMode(root, p, te)
			} else {
				err = w.restoreFile(root, p, te)
			}
		}
		if err != nil {
			return fmt.Errorf("restore %s: %w", p, err)
		}
	}
	return nil
}

func isNotEmpty(err error) bool {
	return errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST)
}

// perm is the permission bits a file of git mode m gets.
func perm(m filemode.FileMode) fs.FileMode {
	if m == filemode.Executable {
		return 0o755
	}
	return 0o644
}

// clear removes whatever is at p (a directory with everything in it).
func clear(root *os.Root, p string) error {
	fi, err := root.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return root.RemoveAll(p)
	}
	return root.Remove(p)
}

// ensureDir makes p a real directory, replacing a file or symlink there.
func (w *Workspace) ensureDir(root *os.Root, p string) error {
	fi, err := root.Lstat(p)
	if err == nil && fi.IsDir() {
		return nil
	}
	if err == nil {
		if err := root.Remove(p); err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := root.Mkdir(p, 0o755); err != nil {
		return err
	}
	if err := root.Chmod(p, 0o755); err != nil {
		return err
	}
	return w.m.lchown(root, p)
}

func (w *Workspace) restoreSymlink(root *os.Root, p string, h plumbing.Hash) error {
	target, err := readBlob(w.st, h)
	if err != nil {
		return err
	}
	if err := clear(root, p); err != nil {
		return err
	}
	if err := root.Symlink(string(target), p); err != nil {
		return err
	}
	return w.m.lchown(root, p)
}

// restoreMode fixes only the executable bit of a file whose content is
// already right; the file is opened without following symlinks.
func (w *Workspace) restoreMode(root *os.Root, p string, te entry) error {
	f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Chmod(perm(te.Mode)); err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	w.remember(p, statKeyOf(fi), te.Hash, time.Now())
	return nil
}

// restoreFile writes the blob to a new file next to p and renames it over
// whatever is at p, so nothing at p (a symlink, a hard link) is written
// through.
func (w *Workspace) restoreFile(root *os.Root, p string, te entry) error {
	o, err := w.st.EncodedObject(plumbing.BlobObject, te.Hash)
	if err != nil {
		return fmt.Errorf("read blob %s: %w", te.Hash, err)
	}
	r, err := o.Reader()
	if err != nil {
		return err
	}
	defer r.Close()
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(path.Dir(p), ".wrench-restore-"+hex.EncodeToString(rnd[:]))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, perm(te.Mode))
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			_ = root.Remove(tmp)
		}
	}()
	if _, err := io.Copy(f, r); err != nil {
		return err
	}
	if err := f.Chmod(perm(te.Mode)); err != nil {
		return err
	}
	if err := w.m.fchown(f); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if fi, err := root.Lstat(p); err == nil && fi.IsDir() {
		if err := root.RemoveAll(p); err != nil {
			return err
		}
	}
	if err := root.Rename(tmp, p); err != nil {
		return err
	}
	ok = true
	fi, err := root.Lstat(p)
	if err != nil {
		return err
	}
	w.remember(p, statKeyOf(fi), te.Hash, time.Now())
	return nil
}
