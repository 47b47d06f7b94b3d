package editformat

import (
	"strings"

	"github.com/wrenchworks/wrench/diff"
)

// matchLeadingWhitespace is aider's matcher for a SEARCH text whose
// indentation is off by the same amount on every line. SEARCH and REPLACE
// are first outdented by the smallest indent of their non-blank lines; then
// whole lines must match except for one common prefix of whitespace, which
// is added to the non-blank REPLACE lines — unless REPLACE already carries
// the matched lines' indentation (see [keepsFileIndent]), when it is kept
// as written.
func matchLeadingWhitespace(orig, search, replace string, from int) (span, bool) {
	part, repl := splitKeep(search), splitKeep(replace)
	if len(part) == 0 {
		return span{}, false
	}
	searchIndent, replIndent := minIndent(part), minIndent(repl)
	minIndent := -1
	for _, group := range [][]string{part, repl} {
		for _, l := range group {
			if strings.TrimSpace(l) != "" {
				if n := indentLen(l); minIndent < 0 || n < minIndent {
					minIndent = n
				}
			}
		}
	}
	if minIndent > 0 {
		part, repl = outdent(part, minIndent), outdent(repl, minIndent)
	}
	lines := origLines(orig)
	for i := firstLineFrom(lines, from); i+len(part) <= len(lines); i++ {
		window := lines[i : i+len(part)]
		add, ok := commonIndent(orig, window, part)
		if !ok {
			continue
		}
		sp := span{start: window[0].start, end: window[len(window)-1].end}
		if keepsFileIndent(searchIndent, replIndent, windowIndent(orig, window)) {
			sp.repl = replace
			return sp, true
		}
		var b strings.Builder
		for _, r := range repl {
			if strings.TrimSpace(r) != "" {
				b.WriteString(add)
			}
			b.WriteString(r)
		}
		sp.repl = b.String()
		return sp, true
	}
	return span{}, false
}

// keepsFileIndent reports whether a REPLACE text is already indented like
// the file lines it replaces rather than like its SEARCH text: its smallest
// indent is the matched lines' smallest indent, which SEARCH's is not. An
// agent that copies the SEARCH lines without indentation but writes REPLACE
// as it should appear in the file must not get the indentation twice.
func keepsFileIndent(searchIndent, replIndent, fileIndent string) bool {
	return replIndent == fileIndent && searchIndent != fileIndent
}

// windowIndent is the smallest indent of the non-blank file lines in window.
func windowIndent(orig string, window []origLine) string {
	lines := make([]string, len(window))
	for i, l := range window {
		lines[i] = orig[l.start:l.end]
	}
	return minIndent(lines)
}

// minIndent returns the leading whitespace of the least indented non-blank
// line ("" when every line is blank).
func minIndent(lines []string) string {
	best, seen := "", false
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if ind := l[:indentLen(l)]; !seen || len(ind) < len(best) {
			best, seen = ind, true
		}
	}
	return best
}

// commonIndent reports whether each file line in window is its part line
// with one common whitespace prefix (blank lines excepted) and returns it.
func commonIndent(orig string, window []origLine, part []string) (string, bool) {
	prefix, seen := "", false
	for j, l := range window {
		w, p := orig[l.start:l.end], part[j]
		if lstrip(w) != lstrip(p) {
			return "", false
		}
		if strings.TrimSpace(w) == "" {
			continue
		}
		if len(w) < len(p) || w[len(w)-len(p):] != p {
			return "", false
		}
		add := w[:len(w)-len(p)]
		if seen && add != prefix {
			return "", false
		}
		prefix, seen = add, true
	}
	return prefix, seen
}

// splitKeep splits s into lines that keep their "\n".
func splitKeep(s string) []string { return diff.SplitLines(s) }

func lstrip(s string) string { return strings.TrimLeft(s, " \t\r\n\v\f") }

func indentLen(s string) int { return len(s) - len(strings.TrimLeft(s, " \t")) }

// outdent removes n leading bytes from every non-blank line.
func outdent(lines []string, n int) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			l = l[n:]
		}
		out[i] = l
	}
	return out
}
