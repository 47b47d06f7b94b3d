package shim

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"
)

const (
	defaultMaxMatches = 1000
	maxGrepFileSize   = 32 << 20
	maxMatchText      = 2000
	binarySniff       = 8000
)

// glob returns the workspace-relative paths under dir matching pattern,
// sorted. "**" matches any number of path segments, "{a,b}" either
// alternative, and the rest follows path.Match. .git is skipped.
func (s *server) glob(ctx context.Context, pattern, dir string) ([]string, error) {
	base, err := s.rel(dir)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(pattern, "/") {
		rel, err := s.rel(pattern)
		if err != nil {
			return nil, err
		}
		pattern = strings.TrimPrefix(strings.TrimPrefix(rel, base), "/")
	}
	pattern = strings.TrimPrefix(pattern, "./")
	var pats [][]string
	for _, p := range expandBraces(pattern) {
		segs := strings.Split(p, "/")
		for _, seg := range segs {
			if _, err := path.Match(seg, ""); err != nil {
				return nil, fmt.Errorf("glob %q: %w", pattern, errInvalidReq)
			}
		}
		pats = append(pats, segs)
	}
	maxDepth := 0 // 0: unlimited
	for _, segs := range pats {
		if hasDoubleStar(segs) {
			maxDepth = -1
			break
		}
		maxDepth = max(maxDepth, len(segs))
	}
	var out []string
	err = s.walk(ctx, base, func(rel string, d fs.DirEntry) error {
		if maxDepth > 0 && d.IsDir() && strings.Count(rel, "/")+1 >= maxDepth {
			if matchAny(pats, rel) {
				out = append(out, path.Join(base, rel))
			}
			return fs.SkipDir
		}
		if matchAny(pats, rel) {
			out = append(out, path.Join(base, rel))
		}
		return nil
	})
	return out, err
}

// walk visits everything under base (not base itself) in lexical order,
// skipping .git directories, with paths relative to base.
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
func (s *server) grep(ctx context.Context, req *Request) ([]Match, error) {
	re, err := regexp.Compile(req.Pattern)
	if err != nil {
		return nil, fmt.Errorf("grep pattern: %w: %w", err, errInvalidReq)
	}
	limit := req.MaxMatches
	if limit <= 0 {
		limit = defaultMaxMatches
	}
	var include [][]string
	for _, p := range expandBraces(req.Include) {
		if p == "" {
			continue
		}
		if _, err := path.Match(strings.ReplaceAll(p, "**", "*"), ""); err != nil {
			return nil, fmt.Errorf("grep include %q: %w", req.Include, errInvalidReq)
		}
		include = append(include, strings.Split(p, "/"))
	}
	base, err := s.rel(req.Path)
	if err != nil {
		return nil, err
	}
	fi, err := s.root.Stat(base)
	if err != nil {
		return nil, classify(err)
	}
	out := []Match{}
	if !fi.IsDir() {
		return s.grepFile(re, base, out, limit), nil
	}
	err = s.walk(ctx, base, func(rel string, d fs.DirEntry) error {
		if !d.Type().IsRegular() {
			return nil
		}
		if len(include) > 0 && !includes(include, rel) {
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

func (s *server) grepFile(re *regexp.Regexp, rel string, out []Match, limit int) []Match {
	fi, err := s.root.Stat(rel)
	if err != nil || fi.Size() > maxGrepFileSize {
		return out
	}
	data, err := s.root.ReadFile(rel)
	if err != nil || bytes.IndexByte(data[:min(len(data), binarySniff)], 0) >= 0 {
		return out
	}
	line := 0
	for len(data) > 0 && len(out) < limit {
		line++
		text := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			text, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		text = bytes.TrimSuffix(text, []byte("\r"))
		if re.Match(text) {
			out = append(out, Match{Path: rel, Line: line, Text: clip(text)})
		}
	}
	return out
}

// clip shortens a matched line without splitting a UTF-8 sequence.
func clip(b []byte) string {
	if len(b) <= maxMatchText {
		return string(b)
	}
	n := maxMatchText
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return string(b[:n]) + "…"
}

// includes matches a grep include filter: a pattern without "/" is matched
// against the file name, one with "/" against the whole relative path.
func includes(pats [][]string, rel string) bool {
	name := path.Base(rel)
	for _, segs := range pats {
		if len(segs) == 1 && segs[0] != "**" {
			if ok, _ := path.Match(segs[0], name); ok {
				return true
			}
			continue
		}
		if matchSegs(segs, strings.Split(rel, "/")) {
			return true
		}
	}
	return false
}

func matchAny(pats [][]string, rel string) bool {
	parts := strings.Split(rel, "/")
	for _, segs := range pats {
		if matchSegs(segs, parts) {
			return true
		}
	}
	return false
}

// matchSegs matches path segments against pattern segments, "**" standing
// for zero or more segments.
func matchSegs(pat, parts []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			rest := pat[1:]
			for i := 0; i <= len(parts); i++ {
				if matchSegs(rest, parts[i:]) {
					return true
				}
			}
			return false
		}
		if len(parts) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], parts[0]); !ok {
			return false
		}
		pat, parts = pat[1:], parts[1:]
	}
	return len(parts) == 0
}

func hasDoubleStar(segs []string) bool {
	for _, s := range segs {
		if strings.Contains(s, "**") {
			return true
		}
	}
	return false
}

// expandBraces expands "{a,b}" alternatives (nesting allowed).
func expandBraces(p string) []string {
	open := strings.IndexByte(p, '{')
	if open < 0 {
		return []string{p}
	}
	depth, close := 0, -1
	var commas []int
	for i := open; i < len(p) && close < 0; i++ {
		switch p[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				close = i
			}
		case ',':
			if depth == 1 {
				commas = append(commas, i)
			}
		}
	}
	if close < 0 {
		return []string{p}
	}
	var out []string
	start := open + 1
	for _, c := range append(commas, close) {
		for _, tail := range expandBraces(p[close+1:]) {
			for _, alt := range expandBraces(p[start:c]) {
				out = append(out, p[:open]+alt+tail)
			}
		}
		start = c + 1
	}
	return out
}
