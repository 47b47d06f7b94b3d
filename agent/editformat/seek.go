package editformat

import (
	"strings"
	"unicode"
)

// lineEqual compares a file line with a pattern line at one fuzz level.
type lineEqual func(line, pattern string) bool

// levelEqual returns the comparison of a fuzz level.
func levelEqual(level int) lineEqual {
	switch level {
	case FuzzExact:
		return func(a, b string) bool { return a == b }
	case FuzzTrailingSpace:
		return equalTrimmedRight
	case FuzzWhitespace:
		return equalTrimmed
	default:
		return func(a, b string) bool { return normalisePunct(a) == normalisePunct(b) }
	}
}

func equalTrimmedRight(a, b string) bool {
	return strings.TrimRightFunc(a, unicode.IsSpace) == strings.TrimRightFunc(b, unicode.IsSpace)
}

func equalTrimmed(a, b string) bool { return strings.TrimSpace(a) == strings.TrimSpace(b) }

// normalisePunct trims s and maps typographic dashes, quotes and spaces to
// their ASCII counterparts.
func normalisePunct(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '\u2010', '\u2011', '\u2012', '\u2013', '\u2014', '\u2015', '\u2212':
			return '-'
		case '\u2018', '\u2019', '\u201A', '\u201B':
			return '\''
		case '\u201C', '\u201D', '\u201E', '\u201F':
			return '"'
		case '\u00A0', '\u2002', '\u2003', '\u2004', '\u2005', '\u2006', '\u2007',
			'\u2008', '\u2009', '\u200A', '\u202F', '\u205F', '\u3000':
			return ' '
		}
		return r
	}, strings.TrimSpace(s))
}

// seekLines returns the first index i >= start where lines[i:] begins with
// pattern under eq. An empty pattern matches at start.
func seekLines(lines, pattern []string, start int, eq lineEqual) (int, bool) {
	for i := max(start, 0); i+len(pattern) <= len(lines); i++ {
		if matchAt(lines, pattern, i, eq) {
			return i, true
		}
	}
	return 0, false
}

func matchAt(lines, pattern []string, i int, eq lineEqual) bool {
	for j, p := range pattern {
		if !eq(lines[i+j], p) {
			return false
		}
	}
	return true
}

// seek finds pattern in lines at or after start at the strictest fuzz level
// that matches. With eof it first tries the end of the file at every level,
// then anywhere from start.
func seek(lines, pattern []string, start int, eof bool) (idx, level int, ok bool) {
	if end := len(lines) - len(pattern); eof && end >= start && end >= 0 {
		for lvl := FuzzExact; lvl <= FuzzPunctuation; lvl++ {
			if matchAt(lines, pattern, end, levelEqual(lvl)) {
				return end, lvl, true
			}
		}
	}
	for lvl := FuzzExact; lvl <= FuzzPunctuation; lvl++ {
		if i, ok := seekLines(lines, pattern, start, levelEqual(lvl)); ok {
			return i, lvl, true
		}
	}
	return 0, 0, false
}

// seekHeader finds an @@ header line at or after start: as a one-line
// pattern at any fuzz level, or else as the start of a trimmed line
// ("@@ class Foo" finds "class Foo(Base):").
func seekHeader(lines []string, header string, start int) (int, bool) {
	if i, _, ok := seek(lines, []string{header}, start, false); ok {
		return i, true
	}
	h := normalisePunct(header)
	if h == "" {
		return 0, false
	}
	for i := max(start, 0); i < len(lines); i++ {
		if strings.HasPrefix(normalisePunct(lines[i]), h) {
			return i, true
		}
	}
	return 0, false
}
