package diff

import (
	"bytes"
	"fmt"
	"strings"
)

// context is the number of unchanged lines shown around each change.
const context = 3

// Unified renders the change of one file as a unified diff with git-style
// "--- a/path" and "+++ b/path" headers ("/dev/null" when before is nil,
// meaning the file is created, or after is nil, meaning it is deleted),
// and counts the added and removed lines. Equal contents give "".
func Unified(path string, before, after []byte) (text string, added, removed int) {
	if bytes.Equal(before, after) && (before == nil) == (after == nil) {
		return "", 0, 0
	}
	var out strings.Builder
	name := strings.TrimPrefix(path, "/")
	from, to := "a/"+name, "b/"+name
	if before == nil {
		from = "/dev/null"
	}
	if after == nil {
		to = "/dev/null"
	}
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", from, to)
	added, removed = WriteHunks(&out, SplitLines(string(before)), SplitLines(string(after)))
	return out.String(), added, removed
}

// WriteHunks writes the hunks turning lines a into lines b (each line
// with its "\n", the last one perhaps without) and counts the added and
// removed lines. Equal lines write nothing.
func WriteHunks(out *strings.Builder, a, b []string) (added, removed int) {
	ops := Script(a, b)
	for i := 0; i < len(ops); {
		if ops[i].Kind == Keep {
			i++
			continue
		}
		// A hunk starts context lines before its first change and runs
		// until a gap of more than 2*context unchanged lines.
		start, end := max(i-context, 0), i
		for j := i; j < len(ops); j++ {
			if ops[j].Kind != Keep {
				end = j + 1
			} else if j-end >= 2*context {
				break
			}
		}
		stop := min(end+context, len(ops))
		writeHunk(out, ops[start:stop], a, b, &added, &removed)
		i = stop
	}
	return added, removed
}

func writeHunk(out *strings.Builder, ops []Op, a, b []string, added, removed *int) {
	na, nb := 0, 0
	for _, op := range ops {
		if op.Kind != Insert {
			na++
		}
		if op.Kind != Delete {
			nb++
		}
	}
	fmt.Fprintf(out, "@@ -%s +%s @@\n", hunkRange(ops[0].A, na), hunkRange(ops[0].B, nb))
	for _, op := range ops {
		var text string
		switch op.Kind {
		case Insert:
			text = b[op.B]
			*added++
		case Delete:
			text = a[op.A]
			*removed++
		default:
			text = a[op.A]
		}
		out.WriteByte(op.Kind)
		out.WriteString(text)
		if !strings.HasSuffix(text, "\n") {
			out.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

// hunkRange formats a hunk's start (0-based) and length the way git does:
// 1-based, the length left out when it is 1, and an empty range naming
// the line before it.
func hunkRange(start, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}
