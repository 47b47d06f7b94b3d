package shim

import (
	"context"
	"io/fs"
	"path"
	"regexp"
	"strings"

	"github.com/wrenchworks/wrench/sandbox"
)

// glob returns the workspace-relative paths under dir matching pattern
// (see sandbox.ParseGlob), in walk order, skipping .git.
func (s *server) glob(ctx context.Context, pattern, dir string) ([]string, error) {
	base, err := s.rel(dir)
	if err != nil {
		return nil, err
	}
	g, err := sandbox.ParseGlob(s.opts.WorkDir, pattern, base)
	if err != nil {
		return nil, err
	}
	maxDepth := g.Depth() // 0: unlimited
	var out []string
	err = s.walk(ctx, base, func(rel string, d fs.DirEntry) error {
		if g.Match(rel) {
			out = append(out, path.Join(base, rel))
		}
		if maxDepth > 0 && d.IsDir() && strings.Count(rel, "/")+1 >= maxDepth {
			return fs.SkipDir
		}
		return nil
	})
	return out, err
}

// walk visits everything under base (not base itself) in walk order
// (sandbox.CompareWalk), skipping .git directories, with paths relative to
// base.
func (s *server) walk(ctx context.Context, base string, fn func(rel string, d fs.DirEntry) error) error {
	fsys, err := fs.Sub(s.root.FS(), base)
	if err != nil {
		return err
	}
	if _, err := fs.Stat(fsys, "."); err != nil {
		return classify(err)
	}
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == "." {
				return err
			}
			return nil // unreadable entry: skip it
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if p == "." {
			return nil
		}
		if d.IsDir() && d.Name() == ".git" {
			return fs.SkipDir
		}
		return fn(p, d)
	})
	return classify(err)
}

// grep searches regular files under req.Path (a file or a directory).
func (s *server) grep(ctx context.Context, req sandbox.GrepRequest) ([]sandbox.GrepMatch, error) {
	g, err := sandbox.CompileGrep(req)
	if err != nil {
		return nil, err
	}
	re, include, limit := g.Re, g.Include, g.Limit
	base, err := s.rel(req.Path)
	if err != nil {
		return nil, err
	}
	fi, err := s.root.Stat(base)
	if err != nil {
		return nil, classify(err)
	}
	out := []sandbox.GrepMatch{}
	if !fi.IsDir() {
		return s.grepFile(re, base, out, limit), nil
	}
	err = s.walk(ctx, base, func(rel string, d fs.DirEntry) error {
		if !d.Type().IsRegular() || !include.Match(rel) {
			return nil
		}
		out = s.grepFile(re, path.Join(base, rel), out, limit)
		if len(out) >= limit {
			return fs.SkipAll
		}
		return nil
	})
	return out, err
}

func (s *server) grepFile(re *regexp.Regexp, rel string, out []sandbox.GrepMatch, limit int) []sandbox.GrepMatch {
	fi, err := s.root.Stat(rel)
	if err != nil || fi.Size() > sandbox.MaxGrepFileSize {
		return out
	}
	data, err := s.root.ReadFile(rel)
	if err != nil {
		return out
	}
	return sandbox.MatchLines(re, rel, data, out, limit)
}
