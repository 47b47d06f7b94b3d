package workspace

import (
	"bufio"
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// Snapshots record the working tree as git tree objects in the workspace's
// private state repository:
//   - every regular file, executable bit, symlink (as a link: its target is
//     never read) and directory (an empty one as an empty tree);
//   - except ".git" at any depth, files and directories matched by the
//     tree's .gitignore files (unless the base commit tracks them), and
//     special files (fifos, sockets, devices), which git cannot represent;
//   - submodules (gitlinks of the base commit) are recorded as in the base.
//
// A stat cache (size, mtime, ctime, inode, mode) avoids re-reading files
// that did not change since they were last hashed.

// racyWindow: a cached hash is trusted only for files last modified at least
// this long before the hash was taken, so a change in the same timestamp
// granule as the read is never missed.
const racyWindow = 50 * time.Millisecond

// streamThreshold: larger files are hashed and stored in two streaming
// passes instead of being read into memory.
const streamThreshold = 8 << 20

// statKey is what must be unchanged for a cached hash to be reused.
type statKey struct {
	size, mtime, ctime int64
	ino                uint64
	mode               uint32
}

type statEntry struct {
	key  statKey
	hash plumbing.Hash
	// trusted is false when the file was modified too close to when it was
	// hashed (see racyWindow).
	trusted bool
}

func statKeyOf(fi fs.FileInfo) statKey {
	if st, ok := sysStat(fi); ok {
		return statKeyOfStat(st)
	}
	return statKey{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
}

func statKeyOfStat(st fileStat) statKey {
	return statKey{size: st.size, mtime: st.mtime, ctime: st.ctime, ino: st.ino, mode: st.mode}
}

// remember caches the hash of the file at p, whose stat is k, taken at now.
func (w *Workspace) remember(p string, k statKey, h plumbing.Hash, now time.Time) {
	w.stat[p] = statEntry{key: k, hash: h, trusted: k.mtime < now.Add(-racyWindow).UnixNano()}
}

// snapshot is one recorded state of the working tree.
type snapshot struct {
	tree  plumbing.Hash
	files flatTree
}

// current snapshots the working tree of an open workspace for op (what
// the error says was being done); w.mu must be held.
func (w *Workspace) current(ctx context.Context, op string) (snapshot, error) {
	if w.closed {
		return snapshot{}, ErrClosed
	}
	snap, err := w.snapshot(ctx)
	if err != nil {
		return snapshot{}, fmt.Errorf("%s: %w", op, err)
	}
	return snap, nil
}

// snapshot walks the working tree and stores it in the state repository.
func (w *Workspace) snapshot(ctx context.Context) (snapshot, error) {
	root, err := os.OpenRoot(w.repoDir)
	if err != nil {
		return snapshot{}, fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()
	out := flatTree{}
	seen := make(map[string]bool, len(w.stat))
	h, err := w.walkDir(ctx, root, "", nil, out, seen)
	if err != nil {
		return snapshot{}, err
	}
	for p := range w.stat {
		if !seen[p] {
			delete(w.stat, p)
		}
	}
	return snapshot{tree: h, files: out}, nil
}

// walkDir records the directory open as dir (at rel) and returns its tree
// hash. Every file operation is relative to an os.Root for the directory,
// and symlinks are never followed. A path the base commit tracks is never
// ignored (as in git).
func (w *Workspace) walkDir(ctx context.Context, dir *os.Root, rel string, patterns []gitignore.Pattern,
	out flatTree, seen map[string]bool) (plumbing.Hash, error) {
	if err := ctx.Err(); err != nil {
		return plumbing.ZeroHash, err
	}
	f, err := dir.Open(".")
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("open %s: %w", displayPath(rel), err)
	}
	infos, err := f.Readdir(-1)
	f.Close()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("list %s: %w", displayPath(rel), err)
	}
	var parts []string
	if rel != "" {
		parts = strings.Split(rel, "/")
	}
	for _, fi := range infos {
		if fi.Name() == ".gitignore" && fi.Mode().IsRegular() {
			ps, err := readIgnore(dir, parts)
			if err != nil {
				return plumbing.ZeroHash, fmt.Errorf("read %s: %w", path.Join(rel, ".gitignore"), err)
			}
			patterns = append(patterns[:len(patterns):len(patterns)], ps...)
		}
	}
	matcher := gitignore.NewMatcher(patterns)
	var entries []treeEntry
	for _, fi := range infos {
		name := fi.Name()
		if strings.EqualFold(name, ".git") {
			continue
		}
		p := path.Join(rel, name)
		if w.envIgnore[p] {
			continue // the environment's own (see Seal)
		}
		if be, ok := w.baseFlat[p]; ok && be.Mode == filemode.Submodule {
			entries = append(entries, treeEntry{name: name, mode: be.Mode, hash: be.Hash})
			out[p] = be
			continue
		}
		_, tracked := w.baseFlat[p]
		isDir := fi.IsDir()
		skip := !tracked && matcher.Match(append(parts[:len(parts):len(parts)], name), isDir)
		mode := fi.Mode()
		switch {
		case isDir:
			if skip {
				continue
			}
			sub, err := dir.OpenRoot(name)
			if err != nil {
				return plumbing.ZeroHash, fmt.Errorf("open %s: %w", p, err)
			}
			th, err := w.walkDir(ctx, sub, p, patterns, out, seen)
			sub.Close()
			if err != nil {
				return plumbing.ZeroHash, err
			}
			entries = append(entries, treeEntry{name: name, mode: filemode.Dir, hash: th})
			out[p] = entry{Mode: filemode.Dir, Hash: th}
		case skip:
			continue
		case mode&fs.ModeSymlink != 0:
			target, err := dir.Readlink(name)
			if err != nil {
				return plumbing.ZeroHash, fmt.Errorf("read link %s: %w", p, err)
			}
			bh, err := w.ow.putBlob([]byte(target))
			if err != nil {
				return plumbing.ZeroHash, err
			}
			entries = append(entries, treeEntry{name: name, mode: filemode.Symlink, hash: bh})
			out[p] = entry{Mode: filemode.Symlink, Hash: bh}
		case mode.IsRegular():
			bh, err := w.fileBlob(dir, name, p, fi)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			seen[p] = true
			fm := filemode.Regular
			if mode&0o100 != 0 {
				fm = filemode.Executable
			}
			entries = append(entries, treeEntry{name: name, mode: fm, hash: bh})
			out[p] = entry{Mode: fm, Hash: bh}
		default:
			// fifos, sockets and devices cannot be recorded in git.
		}
	}
	return w.ow.put(encodeTree(entries))
}

// fileBlob returns the blob hash of the regular file name in dir, from the
// stat cache when it is trustworthy, else by reading it (without following
// a symlink swapped in since the listing) and storing the blob.
func (w *Workspace) fileBlob(dir *os.Root, name, p string, fi fs.FileInfo) (plumbing.Hash, error) {
	if c, ok := w.stat[p]; ok && c.trusted && c.key == statKeyOf(fi) {
		return c.hash, nil
	}
	for attempt := 0; ; attempt++ {
		h, fi2, err := w.hashFile(dir, name)
		if err == errFileChanged && attempt < 3 {
			continue
		}
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("read %s: %w", p, err)
		}
		w.remember(p, statKeyOf(fi2), h, time.Now())
		return h, nil
	}
}

var errFileChanged = fmt.Errorf("file changed while being read")

func (w *Workspace) hashFile(dir *os.Root, name string) (plumbing.Hash, fs.FileInfo, error) {
	f, err := dir.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	if !fi.Mode().IsRegular() {
		return plumbing.ZeroHash, nil, fmt.Errorf("not a regular file")
	}
	size := fi.Size()
	if size <= streamThreshold {
		data := make([]byte, size)
		if _, err := io.ReadFull(f, data); err != nil {
			return plumbing.ZeroHash, nil, shrunk(err)
		}
		h, err := w.ow.putBlob(data)
		return h, fi, err
	}
	hasher := sha1.New()
	hasher.Write(blobHeader(size))
	if _, err := io.CopyN(hasher, bufio.NewReaderSize(f, 1<<20), size); err != nil {
		return plumbing.ZeroHash, nil, shrunk(err)
	}
	var h plumbing.Hash
	copy(h[:], hasher.Sum(nil))
	if w.ow.has(h) {
		return h, fi, nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return plumbing.ZeroHash, nil, err
	}
	stored, err := w.ow.putBlobStream(bufio.NewReaderSize(f, 1<<20), size)
	if err != nil {
		// A write error (a full disk) is itself, never "changed": calling it
		// that hid ENOSPC behind three retries and a wrong reason.
		return plumbing.ZeroHash, nil, shrunk(err)
	}
	return stored, fi, nil
}

// shrunk is errFileChanged for a file that ended before its size (it was
// truncated while being read), and err itself for anything else.
func shrunk(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errFileChanged
	}
	return err
}

// readIgnore parses the .gitignore of dir (a regular file; never a link).
func readIgnore(dir *os.Root, domain []string) ([]gitignore.Pattern, error) {
	f, err := dir.OpenFile(".gitignore", os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ps []gitignore.Pattern
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if line == "" || strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(line, domain))
	}
	return ps, sc.Err()
}

func displayPath(rel string) string {
	if rel == "" {
		return "workspace root"
	}
	return rel
}
