package editformat

import (
	"sort"
	"strings"
)

// isCRLF reports whether b has at least one line break and every line break
// is CRLF.
func isCRLF(b string) bool {
	n := strings.Count(b, "\n")
	return n > 0 && strings.Count(b, "\r\n") == n
}

// toLF turns every CRLF into LF.
func toLF(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }

// toCRLF turns every LF into CRLF; s must not contain CRLF already.
func toCRLF(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

// lineIndex maps byte offsets of a text to 1-based line numbers.
type lineIndex []int

// newLineIndex records where each line of s starts.
func newLineIndex(s string) lineIndex {
	starts := []int{0}
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// line returns the 1-based line holding byte offset off.
func (ix lineIndex) line(off int) int {
	return sort.Search(len(ix), func(i int) bool { return ix[i] > off })
}

// splitLines splits s at "\n" without keeping the breaks; a final line break
// does not start another (empty) line, and "" has no lines.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
