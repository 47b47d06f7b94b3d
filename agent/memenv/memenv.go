// Package memenv is an in-memory sandbox.Env (and sandbox.Checkpointer) for
// tests and benchmarks: files live in a map, and Exec runs registered
// command handlers, a fallback hook, or a tiny set of built-in fake
// commands (echo, cat, true, false, exit N, sleep N, pwd).
//
// Paths, globs and grep follow the shared semantics of package sandbox, and
// the contract suite in internal/sandboxtest holds it to the behaviour of
// the Docker sandbox. An Env is safe for concurrent use.
package memenv

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
)

// ExecFunc handles a command.
type ExecFunc func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error)

type file struct {
	data []byte
	mode fs.FileMode
	mod  time.Time
}

type handler struct {
	prefix string
	fn     ExecFunc
}

// Env is an in-memory workspace. Directories exist as long as a file is
// under them.
type Env struct {
	mu       sync.Mutex
	files    map[string]file
	handlers []handler
	fallback ExecFunc
	commands []string
	snaps    map[string]map[string]file
	base     map[string]file
	nextSnap int
}

var (
	_ sandbox.Env          = (*Env)(nil)
	_ sandbox.Checkpointer = (*Env)(nil)
)

// New returns an Env holding files (path -> content).
func New(files map[string]string) *Env {
	e := &Env{files: map[string]file{}, snaps: map[string]map[string]file{}}
	now := time.Now()
	for p, c := range files {
		if cp, err := clean(p); err == nil {
			e.files[cp] = file{data: []byte(c), mode: 0o644, mod: now}
		}
	}
	e.base = maps.Clone(e.files)
	return e
}

// Handle registers fn for commands that equal prefix or start with prefix
// followed by a space; the longest matching prefix wins.
func (e *Env) Handle(prefix string, fn ExecFunc) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.handlers = append(e.handlers, handler{prefix: prefix, fn: fn})
	slices.SortFunc(e.handlers, func(a, b handler) int { return len(b.prefix) - len(a.prefix) })
}

// Fallback sets the handler for commands no Handle prefix matches (before
// the built-ins).
func (e *Env) Fallback(fn ExecFunc) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fallback = fn
}

// SetFile writes a file directly (as if another process did).
func (e *Env) SetFile(p, content string) {
	cp, err := clean(p)
	if err != nil {
		panic(err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.files[cp] = file{data: []byte(content), mode: 0o644, mod: time.Now()}
}

// File returns a file's content.
func (e *Env) File(p string) (string, bool) {
	cp, err := clean(p)
	if err != nil {
		return "", false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	f, ok := e.files[cp]
	return string(f.data), ok
}

// Files returns a snapshot of every file.
func (e *Env) Files() map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]string, len(e.files))
	for p, f := range e.files {
		out[p] = string(f.data)
	}
	return out
}

// Commands returns the commands Exec ran, in order.
func (e *Env) Commands() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.commands)
}

// clean makes p workspace-relative, refusing paths outside the workspace.
func clean(p string) (string, error) {
	return sandbox.Rel(sandbox.WorkDir, p)
}

// isDir reports whether dir is a directory: the root, or a prefix of a
// file. Callers hold mu.
func (e *Env) isDir(dir string) bool {
	if dir == "." {
		return true
	}
	prefix := dir + "/"
	for p := range e.files {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

// lookup resolves p for op: its clean path, whether it is a file (and
// which), or else a directory. A path that is neither is fs.ErrNotExist.
// Callers hold mu.
func (e *Env) lookup(op, p string) (cp string, f *file, err error) {
	if cp, err = clean(p); err != nil {
		return "", nil, err
	}
	if fl, ok := e.files[cp]; ok {
		return cp, &fl, nil
	}
	if e.isDir(cp) {
		return cp, nil, nil
	}
	return cp, nil, &fs.PathError{Op: op, Path: cp, Err: fs.ErrNotExist}
}

// ReadFile implements sandbox.Env.
func (e *Env) ReadFile(ctx context.Context, p string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	cp, f, err := e.lookup("read", p)
	switch {
	case err != nil:
		return nil, err
	case f == nil:
		return nil, &fs.PathError{Op: "read", Path: cp, Err: sandbox.ErrIsDir}
	}
	return slices.Clone(f.data), nil
}

// WriteFile implements sandbox.Env.
func (e *Env) WriteFile(ctx context.Context, p string, data []byte, mode fs.FileMode) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cp, err := clean(p)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if cp == "." || e.isDir(cp) {
		return &fs.PathError{Op: "write", Path: cp, Err: sandbox.ErrIsDir}
	}
	for d := path.Dir(cp); d != "."; d = path.Dir(d) {
		if _, ok := e.files[d]; ok {
			return &fs.PathError{Op: "write", Path: cp, Err: fmt.Errorf("%s: %w", d, sandbox.ErrNotDir)}
		}
	}
	mode = mode.Perm()
	if mode == 0 {
		mode = 0o644
		if f, ok := e.files[cp]; ok {
			mode = f.mode
		}
	}
	e.files[cp] = file{data: slices.Clone(data), mode: mode, mod: time.Now()}
	return nil
}

// Remove implements sandbox.Env.
func (e *Env) Remove(ctx context.Context, p string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	cp, f, err := e.lookup("remove", p)
	switch {
	case err != nil:
		return err
	case f == nil:
		return &fs.PathError{Op: "remove", Path: cp, Err: sandbox.ErrIsDir}
	}
	delete(e.files, cp)
	return nil
}

// Stat implements sandbox.Env.
func (e *Env) Stat(ctx context.Context, p string) (sandbox.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return sandbox.FileInfo{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	cp, f, err := e.lookup("stat", p)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	return info(cp, f), nil
}

// info describes the file f at p, or the directory p when f is nil.
func info(p string, f *file) sandbox.FileInfo {
	if f == nil {
		return sandbox.FileInfo{Path: p, IsDir: true, Mode: fs.ModeDir | 0o755}
	}
	return sandbox.FileInfo{Path: p, Size: int64(len(f.data)), Mode: f.mode, ModTime: f.mod}
}

// ListDir implements sandbox.Env.
func (e *Env) ListDir(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	cp, f, err := e.lookup("list", p)
	switch {
	case err != nil:
		return nil, err
	case f != nil:
		return nil, &fs.PathError{Op: "list", Path: cp, Err: sandbox.ErrNotDir}
	}
	prefix := ""
	if cp != "." {
		prefix = cp + "/"
	}
	seen := map[string]sandbox.FileInfo{}
	for fp, f := range e.files {
		rest, ok := strings.CutPrefix(fp, prefix)
		if !ok {
			continue
		}
		name, _, nested := strings.Cut(rest, "/")
		if nested {
			seen[name] = info(prefix+name, nil)
		} else {
			seen[name] = info(fp, &f)
		}
	}
	out := slices.Collect(maps.Values(seen))
	slices.SortFunc(out, func(a, b sandbox.FileInfo) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}
