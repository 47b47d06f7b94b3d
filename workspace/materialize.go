package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sync"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"golang.org/x/sys/unix"
)

// fileSpec is one non-directory path of a checkout.
type fileSpec struct {
	path string
	mode filemode.FileMode
	hash plumbing.Hash
	// off and size locate the content in a checkout cache's blob file.
	off, size int64
}

// contentSource provides file contents for a checkout.
type contentSource interface {
	// copyTo writes the content of s to f.
	copyTo(f *os.File, s fileSpec) error
	// read returns the content of s (for symlink targets).
	read(s fileSpec) ([]byte, error)
	// parallel says whether copyTo may be called concurrently.
	parallel() bool
}

// objectContent reads blobs from a repository.
type objectContent struct{ st storer.EncodedObjectStorer }

func (c objectContent) copyTo(f *os.File, s fileSpec) error {
	o, err := c.st.EncodedObject(plumbing.BlobObject, s.hash)
	if err != nil {
		return fmt.Errorf("read blob %s: %w", s.hash, err)
	}
	r, err := o.Reader()
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = io.Copy(f, r)
	return err
}

func (c objectContent) read(s fileSpec) ([]byte, error) { return readBlob(c.st, s.hash) }
func (c objectContent) parallel() bool                  { return false }

// blobFileContent copies ranges of a checkout cache's blob file, in the
// kernel (copy_file_range) where the file system allows.
type blobFileContent struct{ f *os.File }

func (c blobFileContent) copyTo(f *os.File, s fileSpec) error {
	off, left := s.off, s.size
	for left > 0 {
		n, err := unix.CopyFileRange(int(c.f.Fd()), &off, int(f.Fd()), nil, int(left), 0)
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			// Not supported here: copy through user space.
			_, err = io.Copy(f, io.NewSectionReader(c.f, off, left))
			return err
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		left -= int64(n)
	}
	return nil
}

func (c blobFileContent) read(s fileSpec) ([]byte, error) {
	buf := make([]byte, s.size)
	_, err := c.f.ReadAt(buf, s.off)
	return buf, err
}

func (c blobFileContent) parallel() bool { return true }

// checkedOut is one written path: its index entry and stat.
type checkedOut struct {
	entry *index.Entry
	info  fs.FileInfo
}

// materialize writes a checkout into the empty working tree at root:
// directories (dirs, in order), then files. Every path is created fresh
// (O_EXCL, no symlink followed) and given to the configured owner.
func (m *Manager) materialize(ctx context.Context, root *os.Root, dirs []string, files []fileSpec, src contentSource) ([]checkedOut, error) {
	for _, d := range dirs {
		if err := root.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
		if err := root.Chmod(d, 0o755); err != nil {
			return nil, err
		}
		if err := m.lchown(root, d); err != nil {
			return nil, err
		}
	}
	out := make([]checkedOut, len(files))
	workers := 1
	if src.parallel() {
		workers = 4
	}
	chunk := (len(files) + workers - 1) / workers
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for wi := 0; wi < workers; wi++ {
		lo, hi := wi*chunk, min(len(files), (wi+1)*chunk)
		if lo >= hi {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[wi] = m.materializeRange(ctx, root, files[lo:hi], out[lo:hi], src)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

func (m *Manager) materializeRange(ctx context.Context, root *os.Root, files []fileSpec, out []checkedOut, src contentSource) error {
	var dir *os.Root
	curDir := "\x00"
	defer func() {
		if dir != nil {
			dir.Close()
		}
	}()
	for i, s := range files {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		d, name := path.Split(s.path)
		if d != curDir {
			if dir != nil {
				dir.Close()
			}
			rel := path.Clean(d)
			if d == "" {
				rel = "."
			}
			var err error
			if dir, err = root.OpenRoot(rel); err != nil {
				dir = nil
				return fmt.Errorf("open %s: %w", rel, err)
			}
			curDir = d
		}
		fi, err := m.writeOne(dir, name, s, src)
		if err != nil {
			return fmt.Errorf("check out %s: %w", s.path, err)
		}
		out[i] = checkedOut{entry: indexEntry(s, fi), info: fi}
	}
	return nil
}

// writeOne creates one file, symlink or (for a submodule) nothing.
func (m *Manager) writeOne(dir *os.Root, name string, s fileSpec, src contentSource) (fs.FileInfo, error) {
	switch s.mode {
	case filemode.Submodule:
		return nil, nil
	case filemode.Symlink:
		target, err := src.read(s)
		if err != nil {
			return nil, err
		}
		if err := dir.Symlink(string(target), name); err != nil {
			return nil, err
		}
		if err := m.lchown(dir, name); err != nil {
			return nil, err
		}
		return dir.Lstat(name)
	}
	p := perm(s.mode)
	f, err := dir.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := src.copyTo(f, s); err != nil {
		return nil, err
	}
	if err := f.Chmod(p); err != nil {
		return nil, err
	}
	if err := m.fchown(f); err != nil {
		return nil, err
	}
	return f.Stat()
}

// indexEntry is the index entry of a checked-out path, with its stat data
// so git in the sandbox sees it as clean.
func indexEntry(s fileSpec, fi fs.FileInfo) *index.Entry {
	e := &index.Entry{Name: s.path, Mode: s.mode, Hash: s.hash}
	if fi == nil {
		return e
	}
	e.ModifiedAt = fi.ModTime()
	e.Size = uint32(fi.Size())
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.CreatedAt = time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
		e.Dev = uint32(st.Dev)
		e.Inode = uint32(st.Ino)
		e.UID = st.Uid
		e.GID = st.Gid
	}
	return e
}

// checkoutPlan splits a flattened tree into the directories to create and
// the files to write, both in path order.
func checkoutPlan(flat flatTree) (dirs []string, files []fileSpec) {
	for _, p := range flat.sortedPaths() {
		e := flat[p]
		switch e.Mode {
		case filemode.Dir:
			dirs = append(dirs, p)
		case filemode.Submodule:
			dirs = append(dirs, p)
			files = append(files, fileSpec{path: p, mode: e.Mode, hash: e.Hash})
		default:
			files = append(files, fileSpec{path: p, mode: e.Mode, hash: e.Hash})
		}
	}
	return dirs, files
}
