package editformat

import (
	"fmt"
	"strings"
)

// Replace implements the edit tool's replace: old must occur exactly once in
// content, and that occurrence becomes new. Overlapping occurrences count
// separately. Create/delete semantics are the tool's business; Replace only
// replaces (an empty old returns [ErrEmptyOld]).
//
// When every line break of content is CRLF and old has no CR, old and new
// are matched and written with CRLF line breaks.
//
// On zero or several matches it returns a [*MatchError] whose message tells
// the model what to do: for several, the lines where they start; for none, a
// whitespace-insensitive match when one exists.
func Replace(content []byte, old, new string) ([]byte, error) {
	if old == "" {
		return nil, ErrEmptyOld
	}
	s := string(content)
	if isCRLF(s) && strings.Contains(old, "\n") && !strings.Contains(old, "\r") {
		old = toCRLF(old)
		new = toCRLF(toLF(new))
	}
	count, starts := findAll(s, old, maxReportedLines)
	if count == 1 {
		out := make([]byte, 0, len(s)-len(old)+len(new))
		out = append(out, s[:starts[0]]...)
		out = append(out, new...)
		out = append(out, s[starts[0]+len(old):]...)
		return out, nil
	}
	if count == 0 {
		return nil, notFound(s, old)
	}
	ix := newLineIndex(s)
	lines := make([]int, len(starts))
	for i, off := range starts {
		lines[i] = ix.line(off)
	}
	return nil, &MatchError{
		Count: count,
		Lines: lines,
		Hint:  "add surrounding lines to old_string to make it unique",
	}
}

// findAll counts the (possibly overlapping) occurrences of sub in s and
// returns the offsets of the first max of them.
func findAll(s, sub string, max int) (int, []int) {
	var offs []int
	count := 0
	for from := 0; from <= len(s)-len(sub); {
		i := strings.Index(s[from:], sub)
		if i < 0 {
			break
		}
		count++
		if len(offs) < max {
			offs = append(offs, from+i)
		}
		from += i + 1
	}
	return count, offs
}

// notFound explains a missing old_string, looking for a whitespace-insensitive
// match or at least its first line.
func notFound(s, old string) *MatchError {
	fileLines := splitLines(toLF(s))
	oldLines := splitLines(toLF(old))
	// Drop blank lines at both ends of old: they are rarely the problem.
	for len(oldLines) > 0 && strings.TrimSpace(oldLines[0]) == "" {
		oldLines = oldLines[1:]
	}
	for len(oldLines) > 0 && strings.TrimSpace(oldLines[len(oldLines)-1]) == "" {
		oldLines = oldLines[:len(oldLines)-1]
	}
	if len(oldLines) == 0 {
		return &MatchError{Hint: "old_string is only whitespace; include the text to replace"}
	}
	if at, ok := seekLines(fileLines, oldLines, 0, equalTrimmed); ok {
		return &MatchError{
			Lines: []int{at + 1},
			Hint: fmt.Sprintf("it matches at line %d if whitespace is ignored: "+
				"copy the exact indentation, spacing and line breaks from the file", at+1),
		}
	}
	first := strings.TrimSpace(oldLines[0])
	for i, l := range fileLines {
		if strings.Contains(l, first) {
			return &MatchError{
				Lines: []int{i + 1},
				Hint: fmt.Sprintf("its first line occurs at line %d but what follows differs: "+
					"view the file again and copy the text exactly", i+1),
			}
		}
	}
	return &MatchError{Hint: "view the file again and copy the text to replace exactly, including whitespace"}
}
