package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sync"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// fileSpec is one non-directory path of a checkout.
type fileSpec struct {
	path string
	mode filemode.FileMode
	hash plumbing.Hash
	// part, off and size locate the content in a checkout cache's blob
	// files.
	part      int
	off, size int64
}

// contentSource provides file contents for a checkout.
type contentSource interface {
	// copyTo writes the content of s to the open file descriptor fd.
	copyTo(fd int, s fileSpec) error
	// read returns the content of s (for symlink targets).
	read(s fileSpec) ([]byte, error)
	// parallel says whether copyTo may be called concurrently.
	parallel() bool
}

// objectContent reads blobs from a repository.
type objectContent struct{ st storer.EncodedObjectStorer }

func (c objectContent) copyTo(fd int, s fileSpec) error {
	o, err := c.st.EncodedObject(plumbing.BlobObject, s.hash)
	if err != nil {
		return fmt.Errorf("read blob %s: %w", s.hash, err)
	}
	r, err := o.Reader()
	if err != nil {
		return err
	}
	defer r.Close()
	buf := make([]byte, 64<<10)
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			if err := writeAll(fd, buf[:n]); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

func (c objectContent) read(s fileSpec) ([]byte, error) { return readBlob(c.st, s.hash) }
func (c objectContent) parallel() bool                  { return false }

// blobFileContent copies ranges of a checkout cache's blob files (open
// descriptors, indexed by part).
type blobFileContent struct{ fds []int }

func (c blobFileContent) copyTo(fd int, s fileSpec) error {
	return copyRange(c.fds[s.part], s.off, fd, s.size)
}

func (c blobFileContent) read(s fileSpec) ([]byte, error) {
	buf := make([]byte, s.size)
	if err := preadFull(c.fds[s.part], buf, s.off); err != nil {
		return nil, err
	}
	return buf, nil
}

func (c blobFileContent) parallel() bool { return true }

// writeAll writes buf to fd, retrying short writes.
func writeAll(fd int, buf []byte) error {
	for len(buf) > 0 {
		n, err := syscall.Write(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		buf = buf[n:]
	}
	return nil
}

// preadFull fills buf from fd at off.
func preadFull(fd int, buf []byte, off int64) error {
	for len(buf) > 0 {
		n, err := syscall.Pread(fd, buf, off)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		buf, off = buf[n:], off+int64(n)
	}
	return nil
}

// copyRangeUser copies size bytes from src at off to dst through user space.
func copyRangeUser(src int, off int64, dst int, size int64) error {
	buf := make([]byte, min(size, 256<<10))
	for size > 0 {
		chunk := buf[:min(int64(len(buf)), size)]
		if err := preadFull(src, chunk, off); err != nil {
			return err
		}
		if err := writeAll(dst, chunk); err != nil {
			return err
		}
		off += int64(len(chunk))
		size -= int64(len(chunk))
	}
	return nil
}

// checkedOut is one written path: its index entry and stat.
type checkedOut struct {
	entry *index.Entry
	key   statKey
}

// materialize writes a checkout into the empty working tree at root:
// directories (dirs, in order), then files. Directories are opened through
// the os.Root; each file is created in its directory's descriptor with
// O_CREAT|O_EXCL|O_NOFOLLOW on a single path component, so nothing is
// followed or overwritten, and is given to the configured owner.
func (m *Manager) materialize(ctx context.Context, root *os.Root, dirs []string, files []fileSpec, src contentSource) ([]checkedOut, error) {
	for _, d := range dirs {
		if err := root.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
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
	var dir *os.File
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
			if dir, err = root.Open(rel); err != nil {
				dir = nil
				return fmt.Errorf("open %s: %w", rel, err)
			}
			curDir = d
		}
		st, err := m.writeOne(int(dir.Fd()), name, s, src)
		if err != nil {
			return fmt.Errorf("check out %s: %w", s.path, err)
		}
		out[i] = checkedOut{entry: indexEntry(s, st), key: statKeyOfStat(st)}
	}
	return nil
}

// writeOne creates one file or symlink named name in the directory dirfd
// (nothing for a submodule) and returns its stat.
func (m *Manager) writeOne(dirfd int, name string, s fileSpec, src contentSource) (fileStat, error) {
	switch s.mode {
	case filemode.Submodule:
		return fileStat{}, nil
	case filemode.Symlink:
		target, err := src.read(s)
		if err != nil {
			return fileStat{}, err
		}
		if err := symlinkat(string(target), dirfd, name); err != nil {
			return fileStat{}, err
		}
		if m.cfg.Owner != nil {
			if err := fchownat(dirfd, name, m.cfg.Owner.UID, m.cfg.Owner.GID); err != nil {
				return fileStat{}, err
			}
		}
		return fstatat(dirfd, name)
	}
	p := uint32(perm(s.mode))
	fd, err := openat(dirfd, name, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, p)
	if err != nil {
		return fileStat{}, err
	}
	defer syscall.Close(fd)
	if err := src.copyTo(fd, s); err != nil {
		return fileStat{}, err
	}
	if m.cfg.Owner != nil {
		if err := syscall.Fchown(fd, m.cfg.Owner.UID, m.cfg.Owner.GID); err != nil {
			return fileStat{}, err
		}
	}
	st, err := fstat(fd)
	if err != nil {
		return fileStat{}, err
	}
	if st.mode&0o7777 != p {
		// The umask took bits away.
		if err := syscall.Fchmod(fd, p); err != nil {
			return fileStat{}, err
		}
		return fstat(fd)
	}
	return st, nil
}

// indexEntry is the index entry of a checked-out path, with its stat data
// so git in the sandbox sees it as clean.
func indexEntry(s fileSpec, st fileStat) *index.Entry {
	e := &index.Entry{Name: s.path, Mode: s.mode, Hash: s.hash}
	if s.mode == filemode.Submodule {
		return e
	}
	e.CreatedAt = time.Unix(0, st.ctime)
	e.ModifiedAt = time.Unix(0, st.mtime)
	e.Dev = uint32(st.dev)
	e.Inode = uint32(st.ino)
	e.UID = st.uid
	e.GID = st.gid
	e.Size = uint32(st.size)
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
