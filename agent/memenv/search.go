package memenv

import (
	"context"
	"path"
	"slices"
	"strings"

	"github.com/wrenchworks/wrench/sandbox"
)

// walk returns every file and directory strictly under base (a clean
// path, "." for the root), relative to base, in walk order, skipping .git
// directories. Callers hold mu.
func (e *Env) walk(base string) []string {
	prefix := ""
	if base != "." {
		prefix = base + "/"
	}
	seen := map[string]bool{}
	for fp := range e.files {
		rest, ok := strings.CutPrefix(fp, prefix)
		if !ok {
			continue
		}
		parts := strings.Split(rest, "/")
		for i := range parts {
			if i < len(parts)-1 && parts[i] == ".git" {
				break // a directory named .git is not walked
			}
			seen[strings.Join(parts[:i+1], "/")] = true
		}
	}
	return slices.SortedFunc(func(yield func(string) bool) {
		for p := range seen {
			if !yield(p) {
				return
			}
		}
	}, sandbox.CompareWalk)
}

// Glob implements sandbox.Env.
func (e *Env) Glob(ctx context.Context, pattern, dir string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	base, f, err := e.lookup("glob", dir)
	if err != nil {
		return nil, err
	}
	g, err := sandbox.ParseGlob(sandbox.WorkDir, pattern, base)
	if err != nil {
		return nil, err
	}
	var out []string
	if f != nil {
		return out, nil // a file has nothing under it
	}
	depth := g.Depth()
	for _, rel := range e.walk(base) {
		if depth > 0 && strings.Count(rel, "/") >= depth {
			continue
		}
		if g.Match(rel) {
			out = append(out, path.Join(base, rel))
		}
	}
	return out, nil
}

// Grep implements sandbox.Env.
func (e *Env) Grep(ctx context.Context, req sandbox.GrepRequest) ([]sandbox.GrepMatch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	g, err := sandbox.CompileGrep(req)
	if err != nil {
		return nil, err
	}
	re, include, limit := g.Re, g.Include, g.Limit
	e.mu.Lock()
	defer e.mu.Unlock()
	base, f, err := e.lookup("grep", req.Path)
	if err != nil {
		return nil, err
	}
	out := []sandbox.GrepMatch{}
	if f != nil {
		return sandbox.MatchLines(re, base, f.data, out, limit), nil
	}
	for _, rel := range e.walk(base) {
		f, ok := e.files[path.Join(base, rel)]
		if !ok || !include.Match(rel) {
			continue
		}
		if out = sandbox.MatchLines(re, path.Join(base, rel), f.data, out, limit); len(out) >= limit {
			break
		}
	}
	return out, nil
}
