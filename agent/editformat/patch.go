package editformat

import (
	"fmt"
	"strings"
)

// OpKind is the action of one apply_patch file operation.
type OpKind string

// The three file operations of the apply_patch format.
const (
	OpAdd    OpKind = "add"
	OpUpdate OpKind = "update"
	OpDelete OpKind = "delete"
)

// FileOp is one "*** Add File", "*** Update File" or "*** Delete File"
// section of a patch.
type FileOp struct {
	Kind OpKind
	// Path is the path as written in the patch, trimmed of whitespace.
	Path string
	// MoveTo is the "*** Move to:" destination of an update; empty if none.
	MoveTo string
	// Content is an added file's text: each + line followed by "\n".
	Content []byte
	// Chunks are an update's hunks, in file order; there is at least one.
	Chunks []Chunk
}

// Chunk is one hunk of an Update File.
type Chunk struct {
	// Context is the text after "@@ " (empty for a bare "@@"). The chunk's
	// lines are looked for after the line matching it. Consecutive @@ lines
	// are joined with "\n" and sought one after the other.
	Context string
	// Old holds the context and - lines, New the context and + lines,
	// without their one-character prefixes.
	Old, New []string
	// EndOfFile is set by a "*** End of File" line: Old should match the
	// end of the file.
	EndOfFile bool
}

// Patch is a parsed apply_patch text.
type Patch struct {
	// Ops are the file operations in patch order; there is at least one.
	Ops []FileOp
}

// The marker lines of the format; all are matched after trimming whitespace.
const (
	beginMarker  = "*** Begin Patch"
	endMarker    = "*** End Patch"
	addMarker    = "*** Add File:"
	deleteMarker = "*** Delete File:"
	updateMarker = "*** Update File:"
	moveMarker   = "*** Move to:"
	eofMarker    = "*** End of File"
)

// patchLine is one line of patch text with its 1-based number.
type patchLine struct {
	n    int
	text string
}

// ParsePatch parses Codex apply_patch text. Malformed text returns a
// [*PatchError] naming the line at fault; so does a patch with no file
// operation, an Update File with no hunk, and an unknown "*** ..." header.
//
// Beyond the grammar it accepts whitespace around marker lines, a heredoc
// (<<'EOF' ... EOF) or ``` fence around the whole patch, CRLF line breaks,
// several consecutive @@ lines, and blank lines between an added file's +
// lines (read as empty lines of the file).
func ParsePatch(text string) (*Patch, error) {
	lines := patchBody(text)
	body, err := stripEnvelope(lines)
	if err != nil {
		return nil, err
	}
	p := &Patch{}
	for i := 0; i < len(body); {
		l := body[i]
		t := strings.TrimSpace(l.text)
		switch {
		case t == "":
			i++
		case strings.HasPrefix(t, addMarker):
			op, next, err := parseAdd(body, i)
			if err != nil {
				return nil, err
			}
			p.Ops = append(p.Ops, op)
			i = next
		case strings.HasPrefix(t, deleteMarker):
			path, err := markerPath(l, deleteMarker)
			if err != nil {
				return nil, err
			}
			p.Ops = append(p.Ops, FileOp{Kind: OpDelete, Path: path})
			i++
		case strings.HasPrefix(t, updateMarker):
			op, next, err := parseUpdate(body, i)
			if err != nil {
				return nil, err
			}
			p.Ops = append(p.Ops, op)
			i = next
		default:
			return nil, &PatchError{Line: l.n, Msg: fmt.Sprintf("%q is not a valid file operation header; "+
				"expected '*** Add File: {path}', '*** Delete File: {path}' or '*** Update File: {path}'", t)}
		}
	}
	if len(p.Ops) == 0 {
		return nil, &PatchError{Msg: "the patch has no file operations"}
	}
	return p, nil
}

// patchBody splits text into numbered lines without CRs and drops a heredoc
// or fence wrapper and surrounding blank lines.
func patchBody(text string) []patchLine {
	raw := strings.Split(text, "\n")
	lines := make([]patchLine, 0, len(raw))
	for i, r := range raw {
		lines = append(lines, patchLine{n: i + 1, text: strings.TrimSuffix(r, "\r")})
	}
	lines = trimBlank(lines)
	if len(lines) >= 2 {
		first := strings.TrimSpace(lines[0].text)
		last := strings.TrimSpace(lines[len(lines)-1].text)
		heredoc := (first == "<<EOF" || first == "<<'EOF'" || first == `<<"EOF"`) && last == "EOF"
		fence := strings.HasPrefix(first, "```") && last == "```"
		if heredoc || fence {
			lines = trimBlank(lines[1 : len(lines)-1])
		}
	}
	return lines
}

func trimBlank(lines []patchLine) []patchLine {
	for len(lines) > 0 && strings.TrimSpace(lines[0].text) == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1].text) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// stripEnvelope checks the Begin and End markers and returns what is between.
func stripEnvelope(lines []patchLine) ([]patchLine, error) {
	if len(lines) == 0 {
		return nil, &PatchError{Msg: "the patch is empty; it must start with '*** Begin Patch'"}
	}
	if strings.TrimSpace(lines[0].text) != beginMarker {
		return nil, &PatchError{Line: lines[0].n, Msg: "the first line of the patch must be '*** Begin Patch'"}
	}
	last := lines[len(lines)-1]
	if len(lines) < 2 || strings.TrimSpace(last.text) != endMarker {
		return nil, &PatchError{Line: last.n, Msg: "the last line of the patch must be '*** End Patch'"}
	}
	return lines[1 : len(lines)-1], nil
}

// markerPath returns the path after a header marker.
func markerPath(l patchLine, marker string) (string, error) {
	path := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l.text), marker))
	if path == "" {
		return "", &PatchError{Line: l.n, Msg: fmt.Sprintf("%q has no path", strings.TrimSpace(l.text))}
	}
	return path, nil
}

// isHeader reports whether t (trimmed) starts a file operation or ends the
// patch.
func isHeader(t string) bool {
	return strings.HasPrefix(t, "*** ") && t != eofMarker
}

// parseAdd parses an Add File section starting at body[i].
func parseAdd(body []patchLine, i int) (FileOp, int, error) {
	path, err := markerPath(body[i], addMarker)
	if err != nil {
		return FileOp{}, 0, err
	}
	var content strings.Builder
	blanks := 0 // blank lines seen since the last + line
	j := i + 1
	for ; j < len(body); j++ {
		text := body[j].text
		if strings.TrimSpace(text) == "" {
			blanks++
			continue
		}
		if !strings.HasPrefix(text, "+") {
			break
		}
		for ; blanks > 0; blanks-- {
			content.WriteByte('\n')
		}
		content.WriteString(text[1:])
		content.WriteByte('\n')
	}
	if j < len(body) && !isHeader(strings.TrimSpace(body[j].text)) {
		return FileOp{}, 0, &PatchError{Line: body[j].n, Msg: fmt.Sprintf(
			"unexpected line in Add File %s: every line of a new file starts with '+'", path)}
	}
	return FileOp{Kind: OpAdd, Path: path, Content: []byte(content.String())}, j, nil
}

// parseUpdate parses an Update File section starting at body[i].
func parseUpdate(body []patchLine, i int) (FileOp, int, error) {
	path, err := markerPath(body[i], updateMarker)
	if err != nil {
		return FileOp{}, 0, err
	}
	op := FileOp{Kind: OpUpdate, Path: path}
	j := i + 1
	if j < len(body) && strings.HasPrefix(strings.TrimSpace(body[j].text), moveMarker) {
		if op.MoveTo, err = markerPath(body[j], moveMarker); err != nil {
			return FileOp{}, 0, err
		}
		j++
	}
	for j < len(body) {
		t := strings.TrimSpace(body[j].text)
		if t == "" {
			j++
			continue
		}
		if isHeader(t) {
			break
		}
		chunk, next, err := parseChunk(body, j, len(op.Chunks) == 0)
		if err != nil {
			return FileOp{}, 0, err
		}
		op.Chunks = append(op.Chunks, chunk)
		j = next
	}
	if len(op.Chunks) == 0 {
		return FileOp{}, 0, &PatchError{Line: body[i].n, Msg: fmt.Sprintf(
			"Update File %s has no hunk; give at least one @@ hunk with -/+ lines", path)}
	}
	return op, j, nil
}

// parseChunk parses one hunk starting at body[j]; only the first hunk of a
// file may omit its @@ line.
func parseChunk(body []patchLine, j int, first bool) (Chunk, int, error) {
	var c Chunk
	var headers []string
	for j < len(body) {
		t := strings.TrimSpace(body[j].text)
		if t != "@@" && !strings.HasPrefix(t, "@@ ") {
			break
		}
		headers = append(headers, strings.TrimSpace(strings.TrimPrefix(t, "@@")))
		j++
	}
	if len(headers) == 0 && !first {
		return c, 0, &PatchError{Line: body[j].n, Msg: fmt.Sprintf(
			"expected a hunk to start with an @@ line, got %q", body[j].text)}
	}
	c.Context = strings.Join(nonEmpty(headers), "\n")
	start := j
	blanks := 0 // trailing raw blank lines, read as empty context lines
lines:
	for ; j < len(body); j++ {
		text := body[j].text
		if strings.TrimSpace(text) == eofMarker {
			if j > start {
				c.EndOfFile = true
				j++
			}
			break
		}
		if text == "" {
			c.Old = append(c.Old, "")
			c.New = append(c.New, "")
			blanks++
			continue
		}
		switch text[0] {
		case ' ':
			c.Old = append(c.Old, text[1:])
			c.New = append(c.New, text[1:])
		case '-':
			c.Old = append(c.Old, text[1:])
		case '+':
			c.New = append(c.New, text[1:])
		default:
			if j == start {
				return c, 0, &PatchError{Line: body[j].n, Msg: fmt.Sprintf("unexpected line in hunk: %q; "+
					"every line starts with ' ' (context), '-' (removed) or '+' (added)", text)}
			}
			break lines
		}
		blanks = 0
	}
	// Blank lines at the end of a hunk usually separate it from the next.
	if !c.EndOfFile {
		c.Old, c.New = c.Old[:len(c.Old)-blanks], c.New[:len(c.New)-blanks]
	}
	if len(c.Old) == 0 && len(c.New) == 0 {
		n := body[len(body)-1].n
		if start < len(body) {
			n = body[start].n
		}
		return c, 0, &PatchError{Line: n, Msg: "the hunk has no lines"}
	}
	return c, j, nil
}

func nonEmpty(xs []string) []string {
	var out []string
	for _, x := range xs {
		if x != "" {
			out = append(out, x)
		}
	}
	return out
}
