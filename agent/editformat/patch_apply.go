package editformat

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/wrenchworks/wrench/diff"
)

// FileReader reads a file for [ApplyPatch]. It returns an error wrapping
// fs.ErrNotExist for a missing file and [ErrIsDir] for a directory. Paths are
// passed as written in the patch; resolving them is the reader's business.
type FileReader func(path string) ([]byte, error)

// Change is the effect of one patch operation on one file. Changes come in
// patch order; when several operations touch the same path, each Change's
// Before is what the earlier ones left, so writing them in order yields the
// final tree.
type Change struct {
	// Path is the file to write (or to remove when After is nil).
	Path string
	// From is the old path of a move: remove it after writing Path.
	From string
	// Before is the content before the change; nil when the file is added.
	Before []byte
	// After is the content after the change; nil when the file is deleted.
	After []byte
	// Fuzz is the loosest matching pass any chunk of an update needed.
	Fuzz int
}

// Fuzz levels: how loosely a chunk's lines matched the file. Each level also
// allows the looser matching of the levels before it.
const (
	// FuzzExact: lines equal byte for byte.
	FuzzExact = 0
	// FuzzTrailingSpace: lines equal once trailing whitespace is removed.
	FuzzTrailingSpace = 1
	// FuzzWhitespace: lines equal once leading and trailing whitespace is
	// removed.
	FuzzWhitespace = 2
	// FuzzPunctuation: lines equal once trimmed and typographic dashes,
	// quotes and spaces are mapped to ASCII.
	FuzzPunctuation = 3
)

// DefaultMaxFuzz is the MaxFuzz used when [PatchOptions].MaxFuzz is 0: every
// level Codex accepts.
const DefaultMaxFuzz = FuzzPunctuation

// MaxFuzzExact is the [PatchOptions].MaxFuzz value that accepts exact matches
// only (0 means the default).
const MaxFuzzExact = -1

// PatchOptions tunes [ApplyPatch].
type PatchOptions struct {
	// MaxFuzz is the loosest fuzz level accepted; a chunk that matches only
	// above it is refused with [ErrTooFuzzy]. 0 means [DefaultMaxFuzz];
	// [MaxFuzzExact] (any negative value) means exact matches only.
	MaxFuzz int
	// Codex reproduces Codex's own behaviour where Wrench is stricter: Add
	// File and Move to overwrite an existing file, and when an operation
	// fails the changes of the operations before it are returned along with
	// the error (Codex is not atomic). The patch tool never sets it; it
	// exists so the Codex fixtures can be checked as Codex runs them.
	Codex bool
}

func (o PatchOptions) maxFuzz() int {
	switch {
	case o.MaxFuzz == 0:
		return DefaultMaxFuzz
	case o.MaxFuzz < 0:
		return FuzzExact
	}
	return o.MaxFuzz
}

// vfile is a path's state as the patch's earlier operations left it.
type vfile struct {
	data   []byte
	exists bool
	isDir  bool
}

// ApplyPatch parses text (see [ParsePatch]) and computes every change of the
// patch without writing anything, reading files through read. It is
// all-or-nothing: if any operation fails, no Change is returned and the error
// (an [*OpError], or a [*PatchError] for malformed text) names the operation
// and its path. It never overwrites implicitly: Add File onto an existing
// path and Move to onto an existing path are refused with an error wrapping
// fs.ErrExist that names the conflicting path. [PatchOptions].Codex relaxes
// both, as Codex does.
func ApplyPatch(text string, read FileReader, opts PatchOptions) ([]Change, error) {
	p, err := ParsePatch(text)
	if err != nil {
		return nil, err
	}
	files := &vfs{read: read, state: map[string]vfile{}}
	changes := make([]Change, 0, len(p.Ops))
	for i, op := range p.Ops {
		c, err := applyOp(files, op, opts)
		if err != nil {
			err = &OpError{Op: i + 1, Kind: op.Kind, Path: op.Path, MoveTo: op.MoveTo, Err: err}
			if opts.Codex && len(changes) > 0 {
				return changes, err
			}
			return nil, err
		}
		changes = append(changes, c)
	}
	return changes, nil
}

// vfs is the files as the patch has left them so far, read on first use.
type vfs struct {
	read  FileReader
	state map[string]vfile
}

func (v *vfs) get(name string) (vfile, error) {
	key := path.Clean(name)
	if f, ok := v.state[key]; ok {
		return f, nil
	}
	data, err := v.read(name)
	var f vfile
	switch {
	case err == nil:
		if data == nil {
			data = []byte{} // Before is nil only for added files
		}
		f = vfile{data: data, exists: true}
	case errors.Is(err, ErrIsDir):
		f = vfile{exists: true, isDir: true}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return f, fmt.Errorf("read %s: %w", name, err)
	}
	v.state[key] = f
	return f, nil
}

// set records name's new content; nil deletes it.
func (v *vfs) set(name string, data []byte) {
	v.state[path.Clean(name)] = vfile{data: data, exists: data != nil}
}

// applyOp applies one operation to files and returns its change.
func applyOp(files *vfs, op FileOp, opts PatchOptions) (Change, error) {
	f, err := files.get(op.Path)
	if err != nil {
		return Change{}, err
	}
	switch op.Kind {
	case OpAdd:
		var before []byte
		switch {
		case f.exists && !opts.Codex:
			return Change{}, fmt.Errorf("%s: %w; use Update File to change it", op.Path, fs.ErrExist)
		case f.isDir:
			return Change{}, fmt.Errorf("%s: %w, not a file", op.Path, ErrIsDir)
		case f.exists:
			before = f.data
		}
		content := append([]byte{}, op.Content...)
		files.set(op.Path, content)
		return Change{Path: op.Path, Before: before, After: content}, nil
	case OpDelete:
		if err := checkExisting(op.Path, f); err != nil {
			return Change{}, err
		}
		files.set(op.Path, nil)
		return Change{Path: op.Path, Before: f.data}, nil
	}
	return applyUpdate(files, op, f, opts)
}

// applyUpdate applies an Update File operation (and its move, if any).
func applyUpdate(files *vfs, op FileOp, f vfile, opts PatchOptions) (Change, error) {
	if err := checkExisting(op.Path, f); err != nil {
		return Change{}, err
	}
	after, fuzz, err := applyChunks(f.data, op.Chunks, opts.maxFuzz())
	if err != nil {
		return Change{}, err
	}
	c := Change{Path: op.Path, Before: f.data, After: after, Fuzz: fuzz}
	if op.MoveTo != "" && path.Clean(op.MoveTo) != path.Clean(op.Path) {
		dest, err := files.get(op.MoveTo)
		if err != nil {
			return Change{}, err
		}
		if dest.isDir || (dest.exists && !opts.Codex) {
			return Change{}, fmt.Errorf("move destination %s: %w; delete it first or move elsewhere", op.MoveTo, fs.ErrExist)
		}
		files.set(op.Path, nil)
		c.Path, c.From = op.MoveTo, op.Path
	}
	files.set(c.Path, after)
	return c, nil
}

// checkExisting refuses a path that is missing or a directory.
func checkExisting(name string, f vfile) error {
	switch {
	case f.isDir:
		return fmt.Errorf("%s: %w, not a file", name, ErrIsDir)
	case !f.exists:
		return fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
	return nil
}

// replacement swaps lines[start:start+n] for repl.
type replacement struct {
	start, n int
	repl     []string
}

// applyChunks applies an update's chunks to data. The result always ends
// with a newline (unless empty); CRLF files stay CRLF.
func applyChunks(data []byte, chunks []Chunk, maxFuzz int) ([]byte, int, error) {
	s := string(data)
	crlf := isCRLF(s)
	if crlf {
		s = toLF(s)
	}
	lines := strings.Split(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var reps []replacement
	at, fuzz := 0, FuzzExact
	for ci, c := range chunks {
		r, level, err := locateChunk(lines, c, at, maxFuzz)
		if err != nil {
			return nil, 0, fmt.Errorf("hunk %d: %w", ci+1, err)
		}
		reps = append(reps, r)
		fuzz = max(fuzz, level)
		at = r.start + r.n
	}
	res := replaceLines(lines, reps)
	if crlf {
		res = toCRLF(res)
	}
	return []byte(res), fuzz, nil
}

// locateChunk finds where chunk c applies in lines, searching from at
// (after its @@ context lines, if any), and the fuzz level it matched at.
func locateChunk(lines []string, c Chunk, at, maxFuzz int) (replacement, int, error) {
	if c.Context != "" {
		for _, h := range strings.Split(c.Context, "\n") {
			i, ok := seekHeader(lines, h, at)
			if !ok {
				return replacement{}, 0, fmt.Errorf("@@ line %q: %w%s", h, ErrNoMatch, afterLine(at))
			}
			at = i + 1
		}
	}
	if len(c.Old) == 0 {
		insert := at
		if c.Context == "" {
			insert = len(lines)
			if insert > 0 && lines[insert-1] == "" {
				insert--
			}
		}
		return replacement{start: insert, repl: c.New}, FuzzExact, nil
	}
	old, repl := c.Old, c.New
	i, level, ok := seek(lines, old, at, c.EndOfFile)
	if !ok && old[len(old)-1] == "" {
		old = old[:len(old)-1]
		if len(repl) > 0 && repl[len(repl)-1] == "" {
			repl = repl[:len(repl)-1]
		}
		i, level, ok = seek(lines, old, at, c.EndOfFile)
	}
	if !ok {
		return replacement{}, 0, fmt.Errorf("%w%s:\n%s%s", ErrNoMatch, afterLine(at), quoteLines(c.Old), firstLineHint(lines, c.Old))
	}
	if level > maxFuzz {
		return replacement{}, 0, fmt.Errorf("%w: it matches at line %d only with fuzz %d (%s), above the limit %d; "+
			"copy the context lines exactly", ErrTooFuzzy, i+1, level, fuzzName(level), maxFuzz)
	}
	if level > FuzzExact {
		repl = keepFileContext(lines[i:i+len(old)], old, repl)
	}
	return replacement{start: i, n: len(old), repl: repl}, level, nil
}

// replaceLines applies the replacements (in line order) and joins the
// lines, each ending with a newline.
func replaceLines(lines []string, reps []replacement) string {
	sort.SliceStable(reps, func(a, b int) bool { return reps[a].start < reps[b].start })
	out := make([]string, 0, len(lines))
	pos := 0
	for _, r := range reps {
		out = append(out, lines[pos:r.start]...)
		out = append(out, r.repl...)
		pos = r.start + r.n
	}
	out = append(out, lines[pos:]...)
	res := strings.Join(out, "\n")
	if len(out) > 0 {
		res += "\n"
	}
	return res
}

// keepFileContext returns repl with its context lines (those old and repl
// share) taken from the file as it is, so a loosely matched context line
// keeps its own whitespace and punctuation.
func keepFileContext(file, old, repl []string) []string {
	out := append([]string(nil), repl...)
	for _, op := range diff.Script(old, repl) {
		if op.Kind == diff.Keep {
			out[op.B] = file[op.A]
		}
	}
	return out
}

// fuzzName describes a fuzz level for error messages.
func fuzzName(level int) string {
	switch level {
	case FuzzExact:
		return "exact"
	case FuzzTrailingSpace:
		return "trailing whitespace ignored"
	case FuzzWhitespace:
		return "leading and trailing whitespace ignored"
	}
	return "whitespace and typographic punctuation ignored"
}

// afterLine says where a search started, if not at the top.
func afterLine(at int) string {
	if at == 0 {
		return ""
	}
	return fmt.Sprintf(" after line %d", at)
}

// quoteLines renders lines for an error message, at most 20.
func quoteLines(lines []string) string {
	var b strings.Builder
	for i, l := range lines {
		if i == 20 {
			fmt.Fprintf(&b, "  ... (%d more lines)\n", len(lines)-20)
			break
		}
		b.WriteString("  ")
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// firstLineHint says where the first non-blank expected line occurs, if it
// does, so the model can see how the file differs.
func firstLineHint(lines, want []string) string {
	for _, w := range want {
		w = strings.TrimSpace(w)
		if w == "" {
			continue
		}
		for i, l := range lines {
			if strings.TrimSpace(l) == w {
				return fmt.Sprintf("(the first of them occurs at line %d, but the lines after it differ; view the file again)", i+1)
			}
		}
		return "(view the file again and copy the lines exactly)"
	}
	return ""
}
