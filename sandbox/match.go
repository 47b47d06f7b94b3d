package sandbox

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"
)

// The semantics of paths, globs and grep that every backend shares: the
// shim serves them inside a sandbox and agent/memenv in memory, both with
// these functions, so the two cannot drift apart.

// Rel turns a workspace path into a clean slash path relative to the
// workspace root ("." for the root). p is relative, or absolute under root
// (the workspace's absolute path: [WorkDir] inside a sandbox). A path that
// leaves the workspace lexically is refused with [ErrEscape], one holding a
// NUL byte with fs.ErrInvalid; symbolic links are the backend's to check.
func Rel(root, p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("path %q: invalid request: %w", p, fs.ErrInvalid)
	}
	if p == "" {
		return ".", nil
	}
	if strings.HasPrefix(p, "/") {
		root = path.Clean(root)
		c := path.Clean(p)
		switch {
		case c == root:
			return ".", nil
		case strings.HasPrefix(c, root+"/"):
			return c[len(root)+1:], nil
		case root == "/":
			return c[1:], nil
		}
		return "", fmt.Errorf("path %s: %w", p, ErrEscape)
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("path %s: %w", p, ErrEscape)
	}
	return c, nil
}

// Glob is a compiled glob pattern. Each "/"-separated segment follows
// path.Match, except that a segment "**" matches any number of segments
// (zero included), and "{a,b}" stands for either alternative (nesting
// allowed, anywhere in the pattern).
type Glob struct {
	alts [][]string // each alternative, split into segments
}

// ParseGlob compiles a Glob pattern for a search under dir (a clean
// workspace-relative path, "." for the root). An absolute pattern
// ("/workspace/src/*.go") is made relative to dir, with root as in [Rel];
// a leading "./" is dropped. A malformed segment is an error matching
// fs.ErrInvalid.
func ParseGlob(root, pattern, dir string) (Glob, error) {
	if strings.HasPrefix(pattern, "/") {
		rel, err := Rel(root, pattern)
		if err != nil {
			return Glob{}, err
		}
		if dir == "." {
			pattern = rel
		} else {
			pattern = strings.TrimPrefix(strings.TrimPrefix(rel, dir), "/")
		}
	}
	pattern = strings.TrimPrefix(pattern, "./")
	var g Glob
	for _, p := range expandBraces(pattern) {
		segs := strings.Split(p, "/")
		for _, seg := range segs {
			if _, err := path.Match(seg, ""); err != nil {
				return Glob{}, fmt.Errorf("glob %q: invalid request: %w", pattern, fs.ErrInvalid)
			}
		}
		g.alts = append(g.alts, segs)
	}
	return g, nil
}

// Match reports whether rel (slash-separated, relative to the search's
// dir) matches.
func (g Glob) Match(rel string) bool {
	parts := strings.Split(rel, "/")
	for _, segs := range g.alts {
		if matchSegs(segs, parts) {
			return true
		}
	}
	return false
}

// Depth is the number of segments the longest alternative can match, or 0
// when one holds "**" (any depth): a walk need not descend deeper.
func (g Glob) Depth() int {
	depth := 0
	for _, segs := range g.alts {
		for _, s := range segs {
			if strings.Contains(s, "**") {
				return 0
			}
		}
		depth = max(depth, len(segs))
	}
	return depth
}

// Include is a compiled grep include filter.
type Include struct {
	alts [][]string
}

// ParseInclude compiles a grep include filter: glob alternatives as in
// [Glob]; one without "/" is matched against the file name, one with "/"
// against the path relative to the grep's root. The empty filter matches
// every file. A malformed one is an error matching fs.ErrInvalid.
func ParseInclude(include string) (Include, error) {
	var inc Include
	for _, p := range expandBraces(include) {
		if p == "" {
			continue
		}
		if _, err := path.Match(strings.ReplaceAll(p, "**", "*"), ""); err != nil {
			return Include{}, fmt.Errorf("grep include %q: invalid request: %w", include, fs.ErrInvalid)
		}
		inc.alts = append(inc.alts, strings.Split(p, "/"))
	}
	return inc, nil
}

// Match reports whether the file at rel (relative to the grep's root)
// passes the filter.
func (inc Include) Match(rel string) bool {
	if len(inc.alts) == 0 {
		return true
	}
	name := path.Base(rel)
	for _, segs := range inc.alts {
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

// CompareWalk orders slash paths the way a walk visits them: a directory's
// entries by name, each directory's contents right after it ("a", "a/b",
// "a.go"). Glob and Grep results come in this order.
func CompareWalk(a, b string) int {
	for {
		ha, ra, moreA := strings.Cut(a, "/")
		hb, rb, moreB := strings.Cut(b, "/")
		if c := strings.Compare(ha, hb); c != 0 {
			return c
		}
		switch {
		case !moreA && !moreB:
			return 0
		case !moreA:
			return -1
		case !moreB:
			return 1
		}
		a, b = ra, rb
	}
}

// Limits of grep every backend applies.
const (
	// MaxGrepFileSize: larger files are not searched.
	MaxGrepFileSize = 32 << 20
	// MaxMatchText: a longer matching line is clipped (with "…").
	MaxMatchText = 2000
	// binarySniff: a NUL byte in this many leading bytes marks a file
	// binary (not searched).
	binarySniff = 8000
)

// MatchLines appends to out the lines of data (the file at path) that re
// matches, until out holds limit matches, and returns it. Data that looks
// binary has no lines; a line ends at "\n" and a "\r" before it is not
// part of it; a line longer than [MaxMatchText] bytes is clipped.
func MatchLines(re *regexp.Regexp, path string, data []byte, out []GrepMatch, limit int) []GrepMatch {
	if len(data) > MaxGrepFileSize || bytes.IndexByte(data[:min(len(data), binarySniff)], 0) >= 0 {
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
			out = append(out, GrepMatch{Path: path, Line: line, Text: clip(text)})
		}
	}
	return out
}

// clip shortens a matched line without splitting a UTF-8 sequence.
func clip(b []byte) string {
	if len(b) <= MaxMatchText {
		return string(b)
	}
	n := MaxMatchText
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return string(b[:n]) + "…"
}

// CompiledGrep is a checked [GrepRequest], what every backend's Grep
// applies to each file.
type CompiledGrep struct {
	Re      *regexp.Regexp
	Include Include
	// Limit is the request's MaxMatches, or [DefaultMaxMatches].
	Limit int
}

// CompileGrep compiles req's pattern (RE2) and include filter; a malformed
// one is an error matching fs.ErrInvalid.
func CompileGrep(req GrepRequest) (CompiledGrep, error) {
	re, err := regexp.Compile(req.Pattern)
	if err != nil {
		return CompiledGrep{}, fmt.Errorf("grep pattern: %w: invalid request: %w", err, fs.ErrInvalid)
	}
	include, err := ParseInclude(req.Include)
	if err != nil {
		return CompiledGrep{}, err
	}
	limit := req.MaxMatches
	if limit <= 0 {
		limit = DefaultMaxMatches
	}
	return CompiledGrep{Re: re, Include: include, Limit: limit}, nil
}
