// Package memenv is an in-memory agent.Env (and agent.Checkpointer) for
// tests and benchmarks: files live in a map, and Exec runs registered
// command handlers, a fallback hook, or a tiny set of built-in fake
// commands (echo, cat, true, false, exit N, sleep N, pwd).
//
// An Env is safe for concurrent use.
package memenv

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/editformat"
)

// ExecFunc handles a command.
type ExecFunc func(ctx context.Context, req agent.ExecRequest) (agent.ExecResult, error)

type file struct {
	data []byte
	mode fs.FileMode
	mod  time.Time
}

type handler struct {
	prefix string
	fn     ExecFunc
}

// Env is an in-memory workspace.
type Env struct {
	mu       sync.Mutex
	files    map[string]file
	dirs     map[string]bool // directories created explicitly (may be empty)
	handlers []handler
	fallback ExecFunc
	commands []string
	snaps    map[string]map[string]file
	base     map[string]file
	nextSnap int
}

var (
	_ agent.Env          = (*Env)(nil)
	_ agent.Checkpointer = (*Env)(nil)
)

// New returns an Env holding files (path -> content).
func New(files map[string]string) *Env {
	e := &Env{files: map[string]file{}, dirs: map[string]bool{}, snaps: map[string]map[string]file{}}
	for p, c := range files {
		if cp, err := clean(p); err == nil {
			e.files[cp] = file{data: []byte(c), mode: 0o644}
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

// clean makes p workspace-relative, refusing paths outside /workspace.
func clean(p string) (string, error) {
	if strings.HasPrefix(p, "/") {
		switch {
		case p == agent.WorkspaceRoot:
			p = "."
		case strings.HasPrefix(p, agent.WorkspaceRoot+"/"):
			p = p[len(agent.WorkspaceRoot)+1:]
		default:
			return "", &fs.PathError{Op: "resolve", Path: p, Err: fs.ErrPermission}
		}
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", &fs.PathError{Op: "resolve", Path: p, Err: fs.ErrPermission}
	}
	return c, nil
}

// isDir reports whether dir is a directory: the root, an explicit one, or
// a prefix of a file. Callers hold mu.
func (e *Env) isDir(dir string) bool {
	if dir == "." || e.dirs[dir] {
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

// ReadFile implements agent.Env.
func (e *Env) ReadFile(ctx context.Context, p string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cp, err := clean(p)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if f, ok := e.files[cp]; ok {
		return slices.Clone(f.data), nil
	}
	if e.isDir(cp) {
		return nil, &fs.PathError{Op: "read", Path: cp, Err: editformat.ErrIsDir}
	}
	return nil, &fs.PathError{Op: "read", Path: cp, Err: fs.ErrNotExist}
}

// WriteFile implements agent.Env.
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
		return &fs.PathError{Op: "write", Path: cp, Err: editformat.ErrIsDir}
	}
	for d := path.Dir(cp); d != "."; d = path.Dir(d) {
		if _, ok := e.files[d]; ok {
			return &fs.PathError{Op: "write", Path: cp, Err: fmt.Errorf("%s is a file", d)}
		}
	}
	if mode == 0 {
		mode = 0o644
		if f, ok := e.files[cp]; ok {
			mode = f.mode
		}
	}
	e.files[cp] = file{data: slices.Clone(data), mode: mode, mod: time.Now()}
	return nil
}

// Remove implements agent.Env.
func (e *Env) Remove(ctx context.Context, p string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cp, err := clean(p)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.files[cp]; !ok {
		if e.isDir(cp) {
			return &fs.PathError{Op: "remove", Path: cp, Err: editformat.ErrIsDir}
		}
		return &fs.PathError{Op: "remove", Path: cp, Err: fs.ErrNotExist}
	}
	delete(e.files, cp)
	return nil
}

// Stat implements agent.Env.
func (e *Env) Stat(ctx context.Context, p string) (agent.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return agent.FileInfo{}, err
	}
	cp, err := clean(p)
	if err != nil {
		return agent.FileInfo{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if f, ok := e.files[cp]; ok {
		return agent.FileInfo{Path: cp, Size: int64(len(f.data)), Mode: f.mode, ModTime: f.mod}, nil
	}
	if e.isDir(cp) {
		return agent.FileInfo{Path: cp, IsDir: true, Mode: fs.ModeDir | 0o755}, nil
	}
	return agent.FileInfo{}, &fs.PathError{Op: "stat", Path: cp, Err: fs.ErrNotExist}
}

// ListDir implements agent.Env.
func (e *Env) ListDir(ctx context.Context, p string) ([]agent.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cp, err := clean(p)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.files[cp]; ok {
		return nil, &fs.PathError{Op: "list", Path: cp, Err: fmt.Errorf("not a directory")}
	}
	if !e.isDir(cp) {
		return nil, &fs.PathError{Op: "list", Path: cp, Err: fs.ErrNotExist}
	}
	prefix := ""
	if cp != "." {
		prefix = cp + "/"
	}
	seen := map[string]agent.FileInfo{}
	add := func(rest string, f *file) {
		name, _, nested := strings.Cut(rest, "/")
		full := prefix + name
		if nested || f == nil {
			seen[name] = agent.FileInfo{Path: full, IsDir: true, Mode: fs.ModeDir | 0o755}
			return
		}
		seen[name] = agent.FileInfo{Path: full, Size: int64(len(f.data)), Mode: f.mode, ModTime: f.mod}
	}
	for fp, f := range e.files {
		if rest, ok := strings.CutPrefix(fp, prefix); ok && rest != fp || prefix == "" {
			f := f
			add(rest, &f)
		}
	}
	for d := range e.dirs {
		if rest, ok := strings.CutPrefix(d, prefix); ok && rest != "" && (rest != d || prefix == "") {
			add(rest, nil)
		}
	}
	out := slices.Collect(maps.Values(seen))
	slices.SortFunc(out, func(a, b agent.FileInfo) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// globRegexp translates a glob with ** into a regular expression.
func globRegexp(pattern string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch {
		case strings.HasPrefix(pattern[i:], "**/"):
			b.WriteString("(?:.*/)?")
			i += 2
		case strings.HasPrefix(pattern[i:], "**"):
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// Glob implements agent.Env.
func (e *Env) Glob(ctx context.Context, pattern, dir string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cd, err := clean(dir)
	if err != nil {
		return nil, err
	}
	re, err := globRegexp(pattern)
	if err != nil {
		return nil, fmt.Errorf("glob %q: %w", pattern, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for fp := range e.files {
		rel := fp
		if cd != "." {
			var ok bool
			if rel, ok = strings.CutPrefix(fp, cd+"/"); !ok {
				continue
			}
		}
		if strings.HasPrefix(fp, ".git/") {
			continue
		}
		if re.MatchString(rel) {
			out = append(out, fp)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Grep implements agent.Env.
func (e *Env) Grep(ctx context.Context, req agent.GrepRequest) ([]agent.GrepMatch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	re, err := regexp.Compile(req.Pattern)
	if err != nil {
		return nil, fmt.Errorf("grep %q: %w", req.Pattern, err)
	}
	root, err := clean(req.Path)
	if err != nil {
		return nil, err
	}
	var inc *regexp.Regexp
	if req.Include != "" {
		if inc, err = globRegexp(req.Include); err != nil {
			return nil, fmt.Errorf("include %q: %w", req.Include, err)
		}
	}
	limit := req.MaxMatches
	if limit <= 0 {
		limit = 100
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	paths := slices.Sorted(maps.Keys(e.files))
	var out []agent.GrepMatch
	for _, fp := range paths {
		if strings.HasPrefix(fp, ".git/") || (root != "." && fp != root && !strings.HasPrefix(fp, root+"/")) {
			continue
		}
		if inc != nil && !inc.MatchString(path.Base(fp)) {
			continue
		}
		for i, line := range strings.Split(string(e.files[fp].data), "\n") {
			if re.MatchString(line) {
				out = append(out, agent.GrepMatch{Path: fp, Line: i + 1, Text: line})
				if len(out) == limit {
					return out, nil
				}
			}
		}
	}
	if len(out) == 0 && root != "." {
		if _, ok := e.files[root]; !ok && !e.isDir(root) {
			return nil, &fs.PathError{Op: "grep", Path: root, Err: fs.ErrNotExist}
		}
	}
	return out, nil
}

// Exec implements agent.Env: a registered handler, else the fallback, else
// a built-in fake command; anything else exits 127.
func (e *Env) Exec(ctx context.Context, req agent.ExecRequest) (agent.ExecResult, error) {
	if err := ctx.Err(); err != nil {
		return agent.ExecResult{}, err
	}
	cmd := strings.TrimSpace(req.Command)
	e.mu.Lock()
	e.commands = append(e.commands, cmd)
	var fn ExecFunc
	for _, h := range e.handlers {
		if cmd == h.prefix || strings.HasPrefix(cmd, h.prefix+" ") {
			fn = h.fn
			break
		}
	}
	if fn == nil {
		fn = e.fallback
	}
	e.mu.Unlock()
	if fn != nil {
		return fn(ctx, req)
	}
	return e.builtin(ctx, req, cmd)
}

func (e *Env) builtin(ctx context.Context, req agent.ExecRequest, cmd string) (agent.ExecResult, error) {
	name, rest, _ := strings.Cut(cmd, " ")
	rest = strings.TrimSpace(rest)
	res := func(code int, out string) (agent.ExecResult, error) {
		return agent.ExecResult{ExitCode: code, Output: []byte(out)}, nil
	}
	switch name {
	case "true":
		return res(0, "")
	case "false":
		return res(1, "")
	case "pwd":
		return res(0, agent.WorkspaceRoot+"\n")
	case "echo":
		return res(0, unquote(rest)+"\n")
	case "exit":
		n, err := strconv.Atoi(rest)
		if err != nil {
			return res(2, "exit: numeric argument required\n")
		}
		return res(n, "")
	case "cat":
		b, err := e.ReadFile(ctx, unquote(rest))
		if err != nil {
			return res(1, fmt.Sprintf("cat: %s: No such file or directory\n", rest))
		}
		return res(0, string(b))
	case "sleep":
		secs, err := strconv.ParseFloat(rest, 64)
		if err != nil {
			return res(1, "sleep: invalid time interval\n")
		}
		d := time.Duration(secs * float64(time.Second))
		t := time.NewTimer(d)
		defer t.Stop()
		var timeout <-chan time.Time
		if req.Timeout > 0 {
			tt := time.NewTimer(req.Timeout)
			defer tt.Stop()
			timeout = tt.C
		}
		select {
		case <-ctx.Done():
			return agent.ExecResult{}, ctx.Err()
		case <-timeout:
			return agent.ExecResult{ExitCode: 124, TimedOut: true}, nil
		case <-t.C:
			return res(0, "")
		}
	}
	return res(127, fmt.Sprintf("bash: %s: command not found\n", name))
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

// Checkpoint implements agent.Checkpointer: it snapshots every file.
func (e *Env) Checkpoint(ctx context.Context, message string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.nextSnap++
	id := fmt.Sprintf("cp-%d", e.nextSnap)
	e.snaps[id] = maps.Clone(e.files)
	return id, nil
}

// Rollback implements agent.Checkpointer: it restores a snapshot exactly.
func (e *Env) Rollback(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	snap, ok := e.snaps[id]
	if !ok {
		return fmt.Errorf("rollback: unknown checkpoint %q", id)
	}
	e.files = maps.Clone(snap)
	return nil
}

// Diff implements agent.Checkpointer: the unified diff from the files New
// was given to the current ones.
func (e *Env) Diff(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	paths := map[string]bool{}
	for p := range e.base {
		paths[p] = true
	}
	for p := range e.files {
		paths[p] = true
	}
	var b strings.Builder
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		var before, after []byte
		if f, ok := e.base[p]; ok {
			before = f.data
		}
		if f, ok := e.files[p]; ok {
			after = f.data
		}
		d, _, _ := editformat.UnifiedDiff(p, before, after)
		if d != "" {
			fmt.Fprintf(&b, "diff --git a/%s b/%s\n%s", p, p, d)
		}
	}
	return b.String(), nil
}
