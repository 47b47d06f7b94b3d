package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
)

const (
	defaultViewLimit = 2000
	maxLineChars     = 2000
	maxListEntries   = 500
	maxGrepMatches   = 200
)

var viewTool = &tool{
	name: ToolView,
	desc: "View a file with line numbers (cat -n style). Marks the file as read, which edit, write, patch and search_replace require. Use offset and limit for a slice of a long file.",
	params: `{"type":"object","properties":{` +
		`"path":{"type":"string","description":"file path, relative to the workspace"},` +
		`"offset":{"type":"integer","description":"first line to show, 1-based (default 1)"},` +
		`"limit":{"type":"integer","description":"how many lines to show (default 2000)"}},` +
		`"required":["path"]}`,
	required: []string{"path"},
	readOnly: true,
	run:      runView,
}

func runView(ctx context.Context, s *runState, raw json.RawMessage) toolResult {
	a, bad := args[struct {
		Path   string `json:"path"`
		Offset int    `json:"offset"`
		Limit  int    `json:"limit"`
	}](ToolView, raw)
	if bad != nil {
		return *bad
	}
	p, err := cleanPath(a.Path)
	if err != nil {
		return errorResult("%v", err)
	}
	data, err := s.r.Env.ReadFile(ctx, p)
	if err != nil {
		return s.envFailure(ctx, "view "+p, err)
	}
	s.markSeen(p, data)
	if bytes.IndexByte(data, 0) >= 0 {
		return toolResult{output: fmt.Sprintf("%s is a binary file (%d bytes); it cannot be shown as text.", p, len(data))}
	}
	if len(data) == 0 {
		return toolResult{output: fmt.Sprintf("%s is empty.", p)}
	}
	lines := strings.SplitAfter(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	start := max(a.Offset, 1)
	if start > len(lines) {
		return errorResult("offset %d is past the end of %s, which has %d lines.", start, p, len(lines))
	}
	limit := a.Limit
	if limit <= 0 {
		limit = defaultViewLimit
	}
	budget := s.a.cfg.MaxOutputChars
	b := make([]byte, 0, min(len(data)+8*len(lines), budget+maxLineChars+64))
	end := start - 1
	for i := start - 1; i < len(lines) && i < start-1+limit; i++ {
		line := strings.TrimRight(lines[i], "\r\n")
		cut := len(line) > maxLineChars
		if cut {
			line = line[:maxLineChars]
		}
		if len(b)+len(line)+8 > budget && end >= start {
			break
		}
		b = appendLineNumber(b, i+1)
		b = append(b, line...)
		if cut {
			b = append(b, "… [line cut]"...)
		}
		b = append(b, '\n')
		end = i + 1
	}
	if end < len(lines) {
		b = fmt.Appendf(b, "(showing lines %d-%d of %d; view with offset=%d for more)\n", start, end, len(lines), end+1)
	}
	return toolResult{output: strings.TrimRight(string(b), "\n"), display: fmt.Sprintf("viewed %s: lines %d-%d of %d", p, start, end, len(lines))}
}

var lsTool = &tool{
	name: ToolLs,
	desc: "List a directory of the workspace (directories end with /). Ignores .git.",
	params: `{"type":"object","properties":{` +
		`"path":{"type":"string","description":"directory, relative to the workspace (default: the root)"}}}`,
	readOnly: true,
	run:      runLs,
}

func runLs(ctx context.Context, s *runState, raw json.RawMessage) toolResult {
	a, bad := args[struct {
		Path string `json:"path"`
	}](ToolLs, raw)
	if bad != nil {
		return *bad
	}
	p, err := cleanPath(a.Path)
	if err != nil {
		return errorResult("%v", err)
	}
	return runLsPath(ctx, s, p)
}

// runLsPath lists one clean workspace path.
func runLsPath(ctx context.Context, s *runState, p string) toolResult {
	infos, err := s.r.Env.ListDir(ctx, p)
	if err != nil {
		return s.envFailure(ctx, "ls "+p, err)
	}
	var b strings.Builder
	n := 0
	for _, fi := range infos {
		name := fi.Path
		if i := strings.LastIndexByte(name, '/'); i >= 0 {
			name = name[i+1:]
		}
		if name == ".git" {
			continue
		}
		if n == maxListEntries {
			fmt.Fprintf(&b, "[... %d more entries not shown]\n", len(infos)-n)
			break
		}
		n++
		if fi.IsDir {
			name += "/"
		}
		b.WriteString(name)
		b.WriteByte('\n')
	}
	if n == 0 {
		return toolResult{output: p + " is empty."}
	}
	return toolResult{output: strings.TrimRight(b.String(), "\n"), display: fmt.Sprintf("listed %s: %d entries", p, len(infos))}
}

var globTool = &tool{
	name: ToolGlob,
	desc: "Find files whose path matches a glob pattern (** matches any depth, e.g. **/*_test.go). Paths are relative to the workspace; .git is skipped.",
	params: `{"type":"object","properties":{` +
		`"pattern":{"type":"string","description":"glob pattern"},` +
		`"path":{"type":"string","description":"directory to search under (default: the root)"}},` +
		`"required":["pattern"]}`,
	required: []string{"pattern"},
	readOnly: true,
	run:      runGlob,
}

func runGlob(ctx context.Context, s *runState, raw json.RawMessage) toolResult {
	a, bad := args[struct {
		Pattern string `json:"pattern"`
		Path    string `json:"path"`
	}](ToolGlob, raw)
	if bad != nil {
		return *bad
	}
	dir, err := cleanPath(a.Path)
	if err != nil {
		return errorResult("%v", err)
	}
	paths, err := s.r.Env.Glob(ctx, a.Pattern, dir)
	if err != nil {
		return s.envFailure(ctx, "glob "+a.Pattern, err)
	}
	if len(paths) == 0 {
		return toolResult{output: "No files match " + a.Pattern + "."}
	}
	more := 0
	if len(paths) > maxListEntries {
		more = len(paths) - maxListEntries
		paths = paths[:maxListEntries]
	}
	out := strings.Join(paths, "\n")
	if more > 0 {
		out += fmt.Sprintf("\n[... %d more matches not shown: narrow the pattern]", more)
	}
	return toolResult{output: out, display: fmt.Sprintf("glob %s: %d paths", a.Pattern, len(paths)+more)}
}

var grepTool = &tool{
	name: ToolGrep,
	desc: "Search file contents for a regular expression (RE2 syntax). Prints path:line:text. Skips .git.",
	params: `{"type":"object","properties":{` +
		`"pattern":{"type":"string","description":"regular expression"},` +
		`"path":{"type":"string","description":"file or directory to search (default: the root)"},` +
		`"include":{"type":"string","description":"glob on file names, e.g. *.go"}},` +
		`"required":["pattern"]}`,
	required: []string{"pattern"},
	readOnly: true,
	run:      runGrep,
}

func runGrep(ctx context.Context, s *runState, raw json.RawMessage) toolResult {
	a, bad := args[struct {
		Pattern string `json:"pattern"`
		Path    string `json:"path"`
		Include string `json:"include"`
	}](ToolGrep, raw)
	if bad != nil {
		return *bad
	}
	if _, err := regexp.Compile(a.Pattern); err != nil {
		return errorResult("invalid regular expression %q: %v", a.Pattern, err)
	}
	p, err := cleanPath(a.Path)
	if err != nil {
		return errorResult("%v", err)
	}
	matches, err := s.r.Env.Grep(ctx, GrepRequest{Pattern: a.Pattern, Path: p, Include: a.Include, MaxMatches: maxGrepMatches})
	if err != nil {
		return s.envFailure(ctx, "grep "+a.Pattern, err)
	}
	if len(matches) == 0 {
		return toolResult{output: "No matches for " + strconv.Quote(a.Pattern) + "."}
	}
	var b strings.Builder
	b.Grow(len(matches) * 64)
	for _, m := range matches {
		text := m.Text
		if len(text) > maxLineChars {
			text = text[:maxLineChars] + "…"
		}
		b.WriteString(m.Path)
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(m.Line))
		b.WriteByte(':')
		b.WriteString(text)
		b.WriteByte('\n')
	}
	if len(matches) >= maxGrepMatches {
		fmt.Fprintf(&b, "[stopped at %d matches: narrow the pattern, the path or include]\n", maxGrepMatches)
	}
	return toolResult{output: capOutput(strings.TrimRight(b.String(), "\n"), s.a.cfg.MaxOutputChars, 0), display: fmt.Sprintf("grep %s: %d matches", a.Pattern, len(matches))}
}

// envFailure turns an Env error into a tool result: cancellation and
// infrastructure failures end the run, anything else is told to the model.
func (s *runState) envFailure(ctx context.Context, op string, err error) toolResult {
	switch {
	case ctx.Err() != nil:
		return toolResult{fatal: ctx.Err(), output: "Error: interrupted", isError: true}
	case errors.Is(err, ErrEnvFailed):
		return toolResult{fatal: fmt.Errorf("%s: %w", op, err), output: "Error: the environment failed", isError: true}
	case errors.Is(err, fs.ErrNotExist):
		return errorResult("%s: no such file or directory.", op)
	case errors.Is(err, fs.ErrPermission):
		return errorResult("%s: permission denied.", op)
	}
	return errorResult("%s: %v", op, err)
}

// contentHash identifies a file's content for stale detection.
func contentHash(b []byte) [32]byte { return sha256.Sum256(b) }

// markSeen records that the model has seen path with this content.
func (s *runState) markSeen(path string, data []byte) { s.seen[path] = contentHash(data) }

// checkFresh refuses a write to an existing file the model has not viewed,
// or that changed since it did.
func (s *runState) checkFresh(path string, current []byte) *toolResult {
	h, ok := s.seen[path]
	if !ok {
		r := errorResult("%s has not been read in this session. View it first (view %s), then edit.", path, path)
		return &r
	}
	if h != contentHash(current) {
		r := errorResult("%s has changed since you last viewed it (by a command, a rollback or another edit). View it again before editing.", path)
		return &r
	}
	return nil
}

// appendLineNumber appends n right-aligned in six columns and a tab, as
// cat -n does.
func appendLineNumber(b []byte, n int) []byte {
	var num [20]byte
	d := strconv.AppendInt(num[:0], int64(n), 10)
	for i := len(d); i < 6; i++ {
		b = append(b, ' ')
	}
	b = append(b, d...)
	return append(b, '\t')
}
