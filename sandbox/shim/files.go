package shim

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/wrenchworks/wrench/sandbox"
)

var errInvalidReq = fmt.Errorf("invalid request: %w", fs.ErrInvalid)

// rel turns a workspace path (relative, or absolute under the workspace)
// into a clean slash path relative to the root, refusing lexical escapes.
// Symbolic links are checked by os.Root when the path is used.
func (s *server) rel(p string) (string, error) {
	return sandbox.Rel(s.opts.WorkDir, filepath.ToSlash(p))
}

// classify maps os.Root's escape error (unexported) to sandbox.ErrEscape.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if strings.Contains(err.Error(), "path escapes from parent") {
		return fmt.Errorf("%w: %w", sandbox.ErrEscape, err)
	}
	return err
}

func (s *server) readFile(p string) ([]byte, error) {
	rel, err := s.rel(p)
	if err != nil {
		return nil, err
	}
	fi, err := s.root.Stat(rel)
	if err != nil {
		return nil, classify(err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("read %s: %w", p, sandbox.ErrIsDir)
	}
	if fi.Size() > s.opts.MaxReadFile {
		return nil, fmt.Errorf("read %s: %w: %d bytes, limit %d", p, ErrTooLarge, fi.Size(), s.opts.MaxReadFile)
	}
	data, err := s.root.ReadFile(rel)
	if err != nil {
		return nil, classify(err)
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}

// writeFile creates parents as needed. Mode 0 keeps an existing file's
// mode (0644 for a new file); a non-zero mode is applied either way.
func (s *server) writeFile(p string, data []byte, mode uint32) error {
	rel, err := s.rel(p)
	if err != nil {
		return err
	}
	if rel == "." {
		return fmt.Errorf("write %s: %w", p, sandbox.ErrIsDir)
	}
	if dir := path.Dir(rel); dir != "." {
		if err := s.root.MkdirAll(dir, 0o755); err != nil {
			return classify(err)
		}
	}
	perm := fs.FileMode(mode) & fs.ModePerm
	existing, err := s.root.Stat(rel)
	switch {
	case err == nil && existing.IsDir():
		return fmt.Errorf("write %s: %w", p, sandbox.ErrIsDir)
	case err == nil && perm == 0:
		perm = existing.Mode().Perm()
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return classify(err)
	case perm == 0:
		perm = 0o644
	}
	f, err := s.root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return classify(err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if existing != nil && existing.Mode().Perm() != perm || mode != 0 {
		// OpenFile's perm only applies to new files and is masked by umask.
		if err := s.root.Chmod(rel, perm); err != nil {
			return classify(err)
		}
	}
	return nil
}

// remove deletes one file or symbolic link, never a directory.
func (s *server) remove(p string) error {
	rel, err := s.rel(p)
	if err != nil {
		return err
	}
	fi, err := s.root.Lstat(rel)
	if err != nil {
		return classify(err)
	}
	if fi.IsDir() {
		return fmt.Errorf("remove %s: %w", p, sandbox.ErrIsDir)
	}
	return classify(s.root.Remove(rel))
}

func (s *server) stat(p string) (sandbox.FileInfo, error) {
	rel, err := s.rel(p)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	fi, err := s.root.Stat(rel)
	if err != nil {
		return sandbox.FileInfo{}, classify(err)
	}
	return toInfo(rel, fi), nil
}

// list returns one directory's entries sorted by name. Symbolic links are
// described, not followed.
func (s *server) list(p string) ([]sandbox.FileInfo, error) {
	rel, err := s.rel(p)
	if err != nil {
		return nil, err
	}
	f, err := s.root.Open(rel)
	if err != nil {
		return nil, classify(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("list %s: %w", p, sandbox.ErrNotDir)
	}
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", p, err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	out := make([]sandbox.FileInfo, 0, len(entries))
	for _, e := range entries {
		efi, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, toInfo(path.Join(rel, e.Name()), efi))
	}
	return out, nil
}

// usage sums the disk blocks used under the workspace (hard links counted
// once).
func (s *server) usage(ctx context.Context) (int64, error) {
	var total int64
	seen := map[uint64]bool{}
	err := fs.WalkDir(s.root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // vanished or unreadable: not ours to count
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			if st.Nlink > 1 && !fi.IsDir() {
				if seen[st.Ino] {
					return nil
				}
				seen[st.Ino] = true
			}
			total += st.Blocks * 512
			return nil
		}
		total += fi.Size()
		return nil
	})
	return total, err
}

func toInfo(rel string, fi fs.FileInfo) sandbox.FileInfo {
	return sandbox.FileInfo{Path: rel, Size: fi.Size(), Mode: fi.Mode(), IsDir: fi.IsDir(), ModTime: fi.ModTime()}
}
