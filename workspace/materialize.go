package workspace

import (
	"context"
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
	"github.com/go-git/go-git/v5/storage/filesystem"
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

// contentSource provides file contents for a checkout, through one reader
// per goroutine.
type contentSource interface {
	reader() (contentReader, error)
}

// contentReader is one goroutine's access to file contents.
type contentReader interface {
	// copyTo writes the content of s to the open file descriptor fd.
	copyTo(fd int, s fileSpec) error
	// read returns the content of s (for symlink targets).
	read(s fileSpec) ([]byte, error)
	close()
}

// objectContent decodes blobs from the repository at dir; each reader has
// its own go-git storage (they are not safe for concurrent use).
type objectContent struct{ dir string }

func (c objectContent) reader() (contentReader, error) {
	return objectReader{st: openStorage(c.dir, 16<<20)}, nil
}

type objectReader struct{ st *filesystem.Storage }

func (r objectReader) copyTo(fd int, s fileSpec) error {
	o, err := r.st.EncodedObject(plumbing.BlobObject, s.hash)
	if err != nil {
		return fmt.Errorf("read blob %s: %w", s.hash, err)
	}
	rd, err := o.Reader()
	if err != nil {
		return err
	}
	defer rd.Close()
	buf := make([]byte, 64<<10)
	for {
		n, rerr := rd.Read(buf)
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

func (r objectReader) read(s fileSpec) ([]byte, error) { return readBlob(r.st, s.hash) }
func (r objectReader) close()                          { _ = r.st.Close() }

// blobFileContent copies ranges of a checkout cache's blob files (open
// descriptors, indexed by part); copy_file_range and pread are safe to use
// concurrently.
type blobFileContent struct{ fds []int }

func (c blobFileContent) reader() (contentReader, error) { return c, nil }

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

func (c blobFileContent) close() {}

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

// checkoutWorkers is how many goroutines write a checkout. Creating files
// is dominated by per-file latency in the file system (journal, inode
// allocation), which overlapping requests hide.
const checkoutWorkers = 8

// checkoutChunk is the most files one job writes.
const checkoutChunk = 64

// checkoutJob writes some of a directory's files; the first job of a
// directory also creates its subdirectories and queues their jobs.
type checkoutJob struct {
	dir   string
	files []int
	first bool
}

// materialize writes a checkout into the empty working tree at root. Work
// is split into per-directory jobs run by checkoutWorkers goroutines. Each
// directory is opened through the os.Root; inside it, subdirectories and
// files are created with mkdirat/openat(O_CREAT|O_EXCL|O_NOFOLLOW) on a
// single path component, so nothing is followed or overwritten, and given
// to the configured owner.
func (m *Manager) materialize(ctx context.Context, root *os.Root, dirs []string, files []fileSpec, src contentSource) ([]checkedOut, error) {
	children := map[string][]string{}
	for _, d := range dirs {
		parent := path.Dir(d)
		children[parent] = append(children[parent], d)
	}
	filesIn := map[string][]int{}
	for i, f := range files {
		d := path.Dir(f.path)
		filesIn[d] = append(filesIn[d], i)
	}
	jobsOf := func(dir string) []checkoutJob {
		idx := filesIn[dir]
		jobs := []checkoutJob{{dir: dir, first: true, files: idx[:min(len(idx), checkoutChunk)]}}
		for lo := checkoutChunk; lo < len(idx); lo += checkoutChunk {
			jobs = append(jobs, checkoutJob{dir: dir, files: idx[lo:min(len(idx), lo+checkoutChunk)]})
		}
		return jobs
	}
	total := len(jobsOf("."))
	for _, d := range dirs {
		total += len(jobsOf(d))
	}
	queue := make(chan checkoutJob, total) // never blocks: every job fits
	var pending sync.WaitGroup
	enqueue := func(dir string) {
		for _, j := range jobsOf(dir) {
			pending.Add(1)
			queue <- j
		}
	}
	enqueue(".")

	out := make([]checkedOut, len(files))
	var (
		mu       sync.Mutex
		firstErr error
		workers  sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return firstErr != nil
	}
	for range checkoutWorkers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			r, err := src.reader()
			if err != nil {
				fail(err)
			}
			for j := range queue {
				if err == nil && !failed() {
					if jerr := ctx.Err(); jerr != nil {
						fail(jerr)
					} else if jerr := m.runJob(root, j, files, out, r, children, enqueue); jerr != nil {
						fail(jerr)
					}
				}
				pending.Done()
			}
			if r != nil {
				r.close()
			}
		}()
	}
	pending.Wait()
	close(queue)
	workers.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// runJob creates a job's subdirectories (first job of a directory) and
// files.
func (m *Manager) runJob(root *os.Root, j checkoutJob, files []fileSpec, out []checkedOut, r contentReader,
	children map[string][]string, enqueue func(string)) error {
	dir, err := root.Open(j.dir)
	if err != nil {
		return fmt.Errorf("open %s: %w", j.dir, err)
	}
	defer dir.Close()
	dfd := int(dir.Fd())
	if j.first {
		for _, child := range children[j.dir] {
			if err := m.mkdirOne(dfd, path.Base(child)); err != nil {
				return fmt.Errorf("create %s: %w", child, err)
			}
			enqueue(child)
		}
	}
	for _, i := range j.files {
		s := files[i]
		st, err := m.writeOne(dfd, path.Base(s.path), s, r)
		if err != nil {
			return fmt.Errorf("check out %s: %w", s.path, err)
		}
		out[i] = checkedOut{entry: indexEntry(s, st), key: statKeyOfStat(st)}
	}
	return nil
}

// mkdirOne creates directory name (mode 0755) in dirfd for the owner.
func (m *Manager) mkdirOne(dirfd int, name string) error {
	if err := mkdirat(dirfd, name, 0o755); err != nil {
		return err
	}
	fd, err := openat(dirfd, name, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	if m.cfg.Owner != nil {
		if err := syscall.Fchown(fd, m.cfg.Owner.UID, m.cfg.Owner.GID); err != nil {
			return err
		}
	}
	return syscall.Fchmod(fd, 0o755)
}

// writeOne creates one file or symlink named name in the directory dirfd
// (nothing for a submodule) and returns its stat.
func (m *Manager) writeOne(dirfd int, name string, s fileSpec, src contentReader) (fileStat, error) {
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
