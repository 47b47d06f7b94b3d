package editformat

import (
	"fmt"
	"strings"
)

// Block is one SEARCH/REPLACE block.
type Block struct {
	// Path is the file named on the line before the block (aider style),
	// or inherited from the previous block; empty when there is none.
	Path string
	// Search is the text to find and Replace what replaces it; each line of
	// either ends in "\n". An empty Search means the whole file.
	Search, Replace string
}

// srBlock is a parsed block with where it came from.
type srBlock struct {
	Block
	line   int  // 1-based line of the SEARCH marker
	legacy bool // opened with <<<<<<< SEARCH
}

// ParseSearchReplace parses SEARCH/REPLACE blocks: Cline's
// "------- SEARCH" / "=======" / "+++++++ REPLACE" (3 or more marker
// characters, an optional ">" after SEARCH or REPLACE) and the legacy
// "<<<<<<< SEARCH" / ">>>>>>> REPLACE", as a bare diff or inside a chat reply
// with prose and ``` fences (aider's edit blocks). Text outside blocks is
// ignored. Broken markers return a [*SearchReplaceError] of kind
// [KindMalformed]: see the package doc for which.
//
// A <<<<<<< block in a reply must name its file on a line before it (or
// before its opening fence), or inherit the previous block's; only a block
// at the very start of the text may go without. [ApplySearchReplace], whose
// caller names the file, does not ask for one.
func ParseSearchReplace(diff string) ([]Block, error) {
	parsed, err := parseSearchReplace(diff, true)
	if err != nil {
		return nil, err
	}
	blocks := make([]Block, len(parsed))
	for i, b := range parsed {
		blocks[i] = b.Block
	}
	return blocks, nil
}

type srState int

const (
	srOutside srState = iota
	srSearch
	srReplace
)

// parseSearchReplace splits diff into blocks; requirePath asks <<<<<<< blocks
// inside a reply for a filename.
func parseSearchReplace(diff string, requirePath bool) ([]srBlock, error) {
	lines := strings.Split(diff, "\n")
	if len(lines) > 1 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	// A last line that is the start of a marker was cut off mid-stream.
	if last := strings.TrimSuffix(lines[len(lines)-1], "\r"); isPartialMarker(last) {
		lines = lines[:len(lines)-1]
	}
	p := &srParser{lines: lines, requirePath: requirePath}
	for i := range lines {
		var err error
		switch p.state {
		case srOutside:
			err = p.outside(i)
		case srSearch:
			err = p.inSearch(i)
		case srReplace:
			err = p.inReplace(i)
		}
		if err != nil {
			return nil, err
		}
	}
	return p.end()
}

// srParser is the state of parseSearchReplace: the blocks so far, the one
// being read and where it is.
type srParser struct {
	lines       []string
	requirePath bool

	blocks   []srBlock
	cur      srBlock
	search   strings.Builder
	replace  strings.Builder
	state    srState
	lastPath string
	afterEnd int // index of the first line after the previous block
}

func (p *srParser) malformed(line int, format string, args ...any) error {
	return &SearchReplaceError{Kind: KindMalformed, Block: len(p.blocks) + 1, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// line is line i without its carriage return, and its 1-based number.
func (p *srParser) line(i int) (string, int) {
	return strings.TrimSuffix(p.lines[i], "\r"), i + 1
}

// outside reads a line between blocks: a SEARCH marker starts one.
func (p *srParser) outside(i int) error {
	m, n := p.line(i)
	startOK, legacy := isSearchStart(m)
	switch {
	case startOK:
		path := findFilename(p.lines[p.afterEnd:i], legacy)
		if path == "" {
			path = p.lastPath
		}
		if path == "" && legacy && p.requirePath && hasText(p.lines[:i]) {
			return p.malformed(n, "no filename before the block: put the file's path alone on the line "+
				"before the SEARCH marker (or before the opening ``` fence)")
		}
		p.lastPath = path
		p.cur = srBlock{Block: Block{Path: path}, line: n, legacy: legacy}
		p.state = srSearch
	case isSeparator(m, false):
		return p.malformed(n, "%q with no SEARCH marker before it; start each block with a line "+
			"'------- SEARCH' (7 dashes, a space, SEARCH)", m)
	case isReplaceEnd(m):
		return p.malformed(n, "%q with no SEARCH block before it", m)
	}
	return nil
}

// inSearch reads a line of a SEARCH section, up to its separator.
func (p *srParser) inSearch(i int) error {
	m, n := p.line(i)
	startOK, _ := isSearchStart(m)
	switch {
	case isSeparator(m, p.cur.legacy):
		p.state = srReplace
	case isReplaceEnd(m):
		return p.malformed(n, "%q before the ======= line that ends the SEARCH section "+
			"(the separator is a line of only '=' characters)", m)
	case startOK:
		return p.malformed(n, "a new SEARCH marker inside the SEARCH section of the block "+
			"starting at line %d; end it with ======= and a REPLACE section first", p.cur.line)
	default:
		p.search.WriteString(p.lines[i])
		p.search.WriteByte('\n')
	}
	return nil
}

// inReplace reads a line of a REPLACE section, up to its end marker.
func (p *srParser) inReplace(i int) error {
	m, n := p.line(i)
	startOK, _ := isSearchStart(m)
	switch {
	case isReplaceEnd(m):
		p.finish(i)
	case isSeparator(m, p.cur.legacy) && p.cur.legacy:
		p.finish(i) // aider ends a block at a second =======
	case isSeparator(m, false):
		return p.malformed(n, "a second ======= line in the block starting at line %d; "+
			"end the REPLACE section with '+++++++ REPLACE'", p.cur.line)
	case startOK:
		return p.malformed(n, "a new SEARCH marker before the block starting at line %d "+
			"was closed; end it with '+++++++ REPLACE'", p.cur.line)
	default:
		p.replace.WriteString(p.lines[i])
		p.replace.WriteByte('\n')
	}
	return nil
}

// finish closes the current block at line index i.
func (p *srParser) finish(i int) {
	p.cur.Search, p.cur.Replace = p.search.String(), p.replace.String()
	p.blocks = append(p.blocks, p.cur)
	p.search.Reset()
	p.replace.Reset()
	p.state = srOutside
	p.afterEnd = i + 1
}

// end checks how the text ended and returns the blocks.
func (p *srParser) end() ([]srBlock, error) {
	switch {
	case p.state == srSearch:
		return nil, p.malformed(p.cur.line, "the block ends inside its SEARCH section; "+
			"add a ======= line, the REPLACE text and '+++++++ REPLACE'")
	case p.state == srReplace && p.cur.legacy:
		return nil, p.malformed(p.cur.line, "the block is not closed (Expected `>>>>>>> REPLACE` or `=======`)")
	case p.state == srReplace:
		p.finish(len(p.lines)) // Cline applies a last block that lacks its REPLACE marker
	}
	if len(p.blocks) == 0 {
		return nil, &SearchReplaceError{Kind: KindMalformed, Msg: "no SEARCH/REPLACE block found; " +
			"each block is '------- SEARCH', the exact lines to find, '=======', the new lines, '+++++++ REPLACE'"}
	}
	return p.blocks, nil
}

// markerRun returns how many times c starts t.
func markerRun(t string, c byte) int {
	n := 0
	for n < len(t) && t[n] == c {
		n++
	}
	return n
}

// isMarker reports whether t is 3 or more of one of chars followed by
// " "+word and an optional ">"; it returns the character used.
func isMarker(t, chars, word string) (byte, bool) {
	for i := 0; i < len(chars); i++ {
		c := chars[i]
		if n := markerRun(t, c); n >= 3 {
			rest := strings.TrimSuffix(t[n:], ">")
			return c, rest == " "+word
		}
	}
	return 0, false
}

// isSearchStart recognises "------- SEARCH" and "<<<<<<< SEARCH"; legacy is
// set for the latter.
func isSearchStart(m string) (ok, legacy bool) {
	c, ok := isMarker(strings.TrimSpace(m), "-<", "SEARCH")
	return ok, c == '<'
}

// isReplaceEnd recognises "+++++++ REPLACE" and ">>>>>>> REPLACE".
func isReplaceEnd(m string) bool {
	_, ok := isMarker(strings.TrimSpace(m), "+>", "REPLACE")
	return ok
}

// isSeparator recognises "=======": exactly, or (legacy) with whitespace
// around it.
func isSeparator(m string, legacy bool) bool {
	if legacy {
		m = strings.TrimSpace(m)
	}
	return len(m) >= 3 && markerRun(m, '=') == len(m)
}

// isPartialMarker reports whether m is the cut-off beginning of a marker
// line: a run of marker characters, maybe with the start of its word.
func isPartialMarker(m string) bool {
	t := strings.TrimSpace(m)
	if t == "" {
		return false
	}
	c := t[0]
	if strings.IndexByte("-<+>", c) < 0 {
		return false
	}
	n := markerRun(t, c)
	if n < 3 {
		return false
	}
	word := "SEARCH"
	if c == '+' || c == '>' {
		word = "REPLACE"
	}
	rest := t[n:]
	if rest == "" {
		return true
	}
	return strings.HasPrefix(rest, " ") && len(rest) > 1 && len(rest) <= len(word) &&
		strings.HasPrefix(word, rest[1:])
}

// hasText reports whether any line has non-whitespace text.
func hasText(lines []string) bool {
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			return true
		}
	}
	return false
}

// findFilename looks for a file name in the (up to 3) lines before a block,
// skipping back over ``` fence lines, as aider does.
func findFilename(before []string, legacy bool) string {
	var names []string
	for k := len(before) - 1; k >= 0 && k >= len(before)-3; k-- {
		line := before[k]
		if name := stripFilename(line); plausibleFilename(name, legacy) {
			names = append(names, name)
		}
		if !strings.HasPrefix(line, "```") {
			break
		}
	}
	for _, n := range names {
		if strings.Contains(n, ".") {
			return n
		}
	}
	if len(names) > 0 {
		return names[0]
	}
	return ""
}

// plausibleFilename keeps prose out of Block.Path: a name with spaces needs a
// "." or "/"; before a ------- block (where file names are not expected) a
// name needs a "." or "/" and no spaces.
func plausibleFilename(name string, legacy bool) bool {
	spaced := strings.ContainsAny(name, " \t")
	pathy := strings.ContainsAny(name, "./")
	if legacy {
		return name != "" && (!spaced || pathy)
	}
	return !spaced && pathy
}

// stripFilename extracts a file name from a line: "```lang" fences give none
// unless what follows looks like a path; ":", "#", "`" and "*" decorations
// are removed.
func stripFilename(line string) string {
	s := strings.TrimSpace(strings.TrimSuffix(line, "\r"))
	if s == "..." {
		return ""
	}
	if rest, ok := strings.CutPrefix(s, "```"); ok {
		if strings.ContainsAny(rest, "./") {
			return strings.TrimSpace(rest)
		}
		return ""
	}
	s = strings.TrimRight(s, ":")
	s = strings.TrimLeft(s, "#")
	s = strings.TrimSpace(s)
	return strings.Trim(s, "`*")
}
