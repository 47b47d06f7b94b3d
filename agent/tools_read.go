package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/wrenchworks/wrench/sandbox"
)

const (
	defaultViewLimit = 2000
	maxLineChars     = 2000
	maxListEntries   = 500
	maxGrepMatches   = 200
)

var viewTool = &toolDef{
	name: ToolView,
	desc: "View a file with line numbers (cat -n style). Marks the file as read, which edit, write, patch and search_replace require. Use offset and limit for a slice of a long file.",
	params: `{"type":"object","properties":{` +
		`"path":{"type":"string","description":"file path, relative to the workspace"},` +
		`"offset":{"type":"integer","description":"first line to show, 1-based (default 1)"},` +
		`"limit":{"type":"integer","description":"how many lines to show (default 2000)"}},` +
		`"required":["path"]}`,
	required: []string{"path"},
	readOnly: true,
	bind: func(k *toolKit) tool {
		return &view{files: k.env, seen: k.seen, maxOutput: k.cfg.MaxOutputChars}
	},
}

// view shows a file with line numbers and marks it read.
type view struct {
	files     sandbox.Files
	seen      *readTracker
	maxOutput int
}

func (t *view) run(ctx context.Context, _ ToolCall, raw json.RawMessage) toolResult {
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
	data, err := t.files.ReadFile(ctx, p)
	if err != nil {
		return envFailure(ctx, "view "+p, err)
	}
	t.seen.saw(p, data)
	if bytes.IndexByte(data, 0) >= 0 {
		return toolResult{output: fmt.Sprintf("%s is a binary file (%d bytes); it cannot be shown as text.", p, len(data))}
	}
	if len(data) == 0 {
		return toolResult{output: fmt.Sprintf("%s is empty.", p)}
	}
	return numberLines(p, data, a.Offset, a.Limit, t.maxOutput)
}

// numberLines shows limit lines of the file p from offset (1-based; 0
// means the first line and the default count), cat -n style, within
// budget bytes, with a line saying how to see more.
func numberLines(p string, data []byte, offset, limit, budget int) toolResult {
	lines := strings.SplitAfter(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	start := max(offset, 1)
	if start > len(lines) {
		return errorResult("offset %d is past the end of %s, which has %d lines.", start, p, len(lines))
	}
	if limit <= 0 {
		limit = defaultViewLimit
	}
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

var lsTool = &toolDef{
	name: ToolLs,
	desc: "List a directory of the workspace (directories end with /). Ignores .git.",
	params: `{"type":"object","properties":{` +
		`"path":{"type":"string","description":"directory, relative to the workspace (default: the root)"}}}`,
	readOnly: true,
	bind:     func(k *toolKit) tool { return &ls{files: k.env} },
}

// ls lists a directory.
type ls struct {
	files sandbox.Files
}

func (t *ls) run(ctx context.Context, _ ToolCall, raw json.RawMessage) toolResult {
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
	return t.list(ctx, p)
}

// list lists one clean workspace path.
func (t *ls) list(ctx context.Context, p string) toolResult {
	infos, err := t.files.ListDir(ctx, p)
	if err != nil {
		return envFailure(ctx, "ls "+p, err)
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

var globTool = &toolDef{
	name: ToolGlob,
	desc: "Find files whose path matches a glob pattern (** matches any depth, e.g. **/*_test.go). Paths are relative to the workspace; .git is skipped.",
	params: `{"type":"object","properties":{` +
		`"pattern":{"type":"string","description":"glob pattern"},` +
		`"path":{"type":"string","description":"directory to search under (default: the root)"}},` +
		`"required":["pattern"]}`,
	required: []string{"pattern"},
	readOnly: true,
	bind:     func(k *toolKit) tool { return &glob{search: k.env} },
}

// glob finds files by path pattern.
type glob struct {
	search sandbox.Searcher
}

func (t *glob) run(ctx context.Context, _ ToolCall, raw json.RawMessage) toolResult {
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
	paths, err := t.search.Glob(ctx, a.Pattern, dir)
	if err != nil {
		return envFailure(ctx, "glob "+a.Pattern, err)
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

var grepTool = &toolDef{
	name: ToolGrep,
	desc: "Search file contents for a regular expression (RE2 syntax). Prints path:line:text. Skips .git.",
	params: `{"type":"object","properties":{` +
		`"pattern":{"type":"string","description":"regular expression"},` +
		`"path":{"type":"string","description":"file or directory to search (default: the root)"},` +
		`"include":{"type":"string","description":"glob on file names, e.g. *.go"}},` +
		`"required":["pattern"]}`,
	required: []string{"pattern"},
	readOnly: true,
	bind:     func(k *toolKit) tool { return &grep{search: k.env, maxOutput: k.cfg.MaxOutputChars} },
}

// grep searches file contents for a regular expression.
type grep struct {
	search    sandbox.Searcher
	maxOutput int
}

func (t *grep) run(ctx context.Context, _ ToolCall, raw json.RawMessage) toolResult {
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
	matches, err := t.search.Grep(ctx, sandbox.GrepRequest{Pattern: a.Pattern, Path: p, Include: a.Include, MaxMatches: maxGrepMatches})
	if err != nil {
		return envFailure(ctx, "grep "+a.Pattern, err)
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
	return toolResult{output: capOutput(strings.TrimRight(b.String(), "\n"), t.maxOutput, 0), display: fmt.Sprintf("grep %s: %d matches", a.Pattern, len(matches))}
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
