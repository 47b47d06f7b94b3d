package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// installShim copies the running executable into dataDir/bin and returns
// the copy's path, which the Docker backend bind-mounts into every sandbox
// as the in-sandbox helper, and a release func to call when no sandbox
// will be started any more.
//
// The engine resolves bind-mount sources on its own host, so when wrench
// itself runs in a container (Compose, Kubernetes with a Docker sidecar)
// its executable path means nothing to the engine. The data dir, by
// contrast, is mounted at the same path for both, which makes a copy there
// reachable. The copy is named by size and modification time, so it is made
// once per build and reused after; copies of other builds (and the
// `bin/wrench` older setups installed by hand) are removed unless a
// running process still uses them, so the directory does not grow with
// every upgrade. A process marks its copy in use with a shared flock held
// until release.
func installShim(dataDir string, log *slog.Logger) (string, func(), error) {
	dst, err := copyShim(dataDir)
	if err != nil {
		return "", nil, err
	}
	f, err := os.Open(dst)
	if err != nil {
		return "", nil, fmt.Errorf("open %s: %w", dst, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		f.Close()
		return "", nil, fmt.Errorf("lock %s: %w", dst, err)
	}
	pruneShims(filepath.Dir(dst), dst, log)
	return dst, func() { f.Close() }, nil
}

// copyShim makes the copy when it does not exist yet and returns its path.
func copyShim(dataDir string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the wrench executable: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return "", fmt.Errorf("resolve the wrench executable: %w", err)
	}
	st, err := os.Stat(exe)
	if err != nil {
		return "", fmt.Errorf("stat %s: %w", exe, err)
	}
	dir := filepath.Join(dataDir, "bin")
	dst := filepath.Join(dir, fmt.Sprintf("wrench-%d-%d", st.Size(), st.ModTime().UnixNano()))
	if dst == exe {
		return dst, nil
	}
	if cur, err := os.Stat(dst); err == nil && cur.Size() == st.Size() {
		return dst, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", shimDirError(dir, err)
	}
	if err := copyExecutable(exe, dst); err != nil {
		return "", shimDirError(dir, err)
	}
	return dst, nil
}

// shimDirError explains a failed copy into dir; for a permission error it
// names the directory's owner and this process's user, and the fix.
func shimDirError(dir string, err error) error {
	if !errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("copy the wrench binary into %s (the sandboxes' helper): %w", dir, err)
	}
	owner := "another user"
	d := dir
	for ; d != filepath.Dir(d); d = filepath.Dir(d) {
		if fi, serr := os.Stat(d); serr == nil {
			if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
				owner = fmt.Sprintf("uid %d", sys.Uid)
			}
			break
		}
	}
	data := filepath.Dir(dir)
	return fmt.Errorf("copy the wrench binary into %s (the sandboxes' helper): %w: %s belongs to %s and wrench runs as uid %d; "+
		"give the data directory to wrench's user: chown -R %d:%d %s",
		dir, err, d, owner, os.Getuid(), os.Getuid(), os.Getgid(), data)
}

// pruneShims removes from dir the binaries of other builds (wrench-*, and
// a hand-installed wrench) and temporary files of interrupted copies,
// keeping keep and any copy another process still uses.
func pruneShims(dir, keep string, log *slog.Logger) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		p := filepath.Join(dir, name)
		if p == keep || e.IsDir() {
			continue
		}
		if name != "wrench" && !strings.HasPrefix(name, "wrench-") && !strings.HasPrefix(name, ".wrench-") {
			continue
		}
		if inUse(p) {
			continue
		}
		if err := os.Remove(p); err != nil {
			log.Warn("remove an old copy of the wrench binary", "path", p, "err", err)
			continue
		}
		log.Info("removed an old copy of the wrench binary", "path", p)
	}
}

// copyExecutable copies src to dst through a temporary file and a rename,
// so a concurrent reader never sees a half-written binary.
func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".wrench-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// inUse reports whether another process holds a lock on the file at p
// (sandboxes bind-mount it); a file that cannot be opened counts as in
// use. (A process running from such a file is not disturbed by its
// removal: the kernel keeps the file until the process ends.)
func inUse(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return true
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	return false
}
