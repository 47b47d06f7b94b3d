package editformat

import (
	"bytes"
	"fmt"
	"strings"
)

// diffContext is the number of unchanged lines shown around each change.
const diffContext = 3

// diffBudget bounds the work of one line diff (diagonals visited plus snake
// steps).
// Past it, the remaining differing region is shown as removed and re-added
// whole: still a correct diff, only not a minimal one.
const diffBudget = 20_000_000

// UnifiedDiff renders the change of one file as a unified diff with git-style
// "--- a/path" and "+++ b/path" headers ("/dev/null" when before is nil,
// meaning the file is created, or after is nil, meaning it is deleted) and 3
// lines of context, and counts the added and removed lines. A missing final
// newline is marked "\ No newline at end of file". Equal contents give "".
func UnifiedDiff(path string, before, after []byte) (diff string, added, removed int) {
	if bytes.Equal(before, after) && (before == nil) == (after == nil) {
		return "", 0, 0
	}
	a, b := splitKeep(string(before)), splitKeep(string(after))
	ops := diffLines(a, b)

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
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start, end := max(i-diffContext, 0), i
		for j := i; j < len(ops); j++ {
			if ops[j].kind != ' ' {
				end = j + 1
			} else if j-end >= 2*diffContext {
				break
			}
		}
		stop := min(end+diffContext, len(ops))
		writeHunk(&out, ops[start:stop], a, b, &added, &removed)
		i = stop
	}
	return out.String(), added, removed
}

// lineOp is one line of a diff: kind ' ' (in both), '-' (only in a) or '+'
// (only in b); ai and bi are the positions in a and b where it stands.
type lineOp struct {
	kind   byte
	ai, bi int
}

func writeHunk(out *strings.Builder, ops []lineOp, a, b []string, added, removed *int) {
	na, nb := 0, 0
	for _, op := range ops {
		if op.kind != '+' {
			na++
		}
		if op.kind != '-' {
			nb++
		}
	}
	fmt.Fprintf(out, "@@ -%s +%s @@\n", hunkRange(ops[0].ai, na), hunkRange(ops[0].bi, nb))
	for _, op := range ops {
		var text string
		switch op.kind {
		case '+':
			text = b[op.bi]
			*added++
		case '-':
			text = a[op.ai]
			*removed++
		default:
			text = a[op.ai]
		}
		out.WriteByte(op.kind)
		out.WriteString(text)
		if !strings.HasSuffix(text, "\n") {
			out.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

// hunkRange formats a hunk's start and length; an empty range names the line
// before it.
func hunkRange(start, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

// LineChanges compares two sequences of lines with Myers' linear-space
// algorithm and reports which lines of a are deleted and which lines of b
// are inserted; the rest are common, in order. Past a fixed work budget a
// region is reported as wholly replaced: still correct, not minimal.
func LineChanges(a, b []string) (deleted, inserted []bool) {
	ids := map[string]int{}
	intern := func(lines []string) []int {
		out := make([]int, len(lines))
		for i, l := range lines {
			id, ok := ids[l]
			if !ok {
				id = len(ids)
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	d := &differ{a: intern(a), b: intern(b), budget: diffBudget}
	d.del, d.ins = make([]bool, len(a)), make([]bool, len(b))
	d.compare(0, len(a), 0, len(b))
	return d.del, d.ins
}

// diffLines returns the edit script turning a into b.
func diffLines(a, b []string) []lineOp {
	del, ins := LineChanges(a, b)
	ops := make([]lineOp, 0, max(len(a), len(b)))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && del[i]:
			ops = append(ops, lineOp{'-', i, j})
			i++
		case j < len(b) && ins[j]:
			ops = append(ops, lineOp{'+', i, j})
			j++
		default:
			ops = append(ops, lineOp{' ', i, j})
			i++
			j++
		}
	}
	return ops
}

// differ computes a line diff with Myers' linear-space algorithm, marking
// removed lines of a in del and added lines of b in ins.
type differ struct {
	a, b     []int
	del, ins []bool
	budget   int
}

func (d *differ) compare(aLo, aHi, bLo, bHi int) {
	for aLo < aHi && bLo < bHi && d.a[aLo] == d.b[bLo] {
		aLo, bLo = aLo+1, bLo+1
	}
	for aLo < aHi && bLo < bHi && d.a[aHi-1] == d.b[bHi-1] {
		aHi, bHi = aHi-1, bHi-1
	}
	if aLo == aHi || bLo == bHi {
		d.mark(aLo, aHi, bLo, bHi)
		return
	}
	x, y, ok := d.bisect(aLo, aHi, bLo, bHi)
	if !ok || (x == aLo && y == bLo) || (x == aHi && y == bHi) {
		d.mark(aLo, aHi, bLo, bHi)
		return
	}
	d.compare(aLo, x, bLo, y)
	d.compare(x, aHi, y, bHi)
}

// mark records a[aLo:aHi] as removed and b[bLo:bHi] as added.
func (d *differ) mark(aLo, aHi, bLo, bHi int) {
	for i := aLo; i < aHi; i++ {
		d.del[i] = true
	}
	for j := bLo; j < bHi; j++ {
		d.ins[j] = true
	}
}

// bisect finds the middle snake of the shortest edit script between
// a[aLo:aHi] and b[bLo:bHi], searching forward and backward at once, and
// returns a point on it to split the problem at. It gives up (ok false) when
// the work budget runs out.
func (d *differ) bisect(aLo, aHi, bLo, bHi int) (x, y int, ok bool) {
	n, m := aHi-aLo, bHi-bLo
	maxD := (n + m + 1) / 2
	off, size := maxD, 2*maxD+2
	v1, v2 := make([]int, size), make([]int, size)
	for i := range v1 {
		v1[i], v2[i] = -1, -1
	}
	v1[off+1], v2[off+1] = 0, 0
	delta := n - m
	front := delta%2 != 0
	var k1start, k1end, k2start, k2end int
	for dd := 0; dd < maxD; dd++ {
		if d.budget -= 2*dd + 1; d.budget < 0 {
			return 0, 0, false
		}
		for k1 := -dd + k1start; k1 <= dd-k1end; k1 += 2 {
			k := off + k1
			var x1 int
			if k1 == -dd || (k1 != dd && v1[k-1] < v1[k+1]) {
				x1 = v1[k+1]
			} else {
				x1 = v1[k-1] + 1
			}
			y1 := x1 - k1
			for x1 < n && y1 < m && d.a[aLo+x1] == d.b[bLo+y1] {
				x1, y1 = x1+1, y1+1
				d.budget--
			}
			v1[k] = x1
			switch {
			case x1 > n:
				k1end += 2
			case y1 > m:
				k1start += 2
			case front:
				if k2 := off + delta - k1; k2 >= 0 && k2 < size && v2[k2] != -1 && x1 >= n-v2[k2] {
					return aLo + x1, bLo + y1, true
				}
			}
		}
		for k2 := -dd + k2start; k2 <= dd-k2end; k2 += 2 {
			k := off + k2
			var x2 int
			if k2 == -dd || (k2 != dd && v2[k-1] < v2[k+1]) {
				x2 = v2[k+1]
			} else {
				x2 = v2[k-1] + 1
			}
			y2 := x2 - k2
			for x2 < n && y2 < m && d.a[aHi-x2-1] == d.b[bHi-y2-1] {
				x2, y2 = x2+1, y2+1
				d.budget--
			}
			v2[k] = x2
			switch {
			case x2 > n:
				k2end += 2
			case y2 > m:
				k2start += 2
			case !front:
				if k1 := off + delta - k2; k1 >= 0 && k1 < size && v1[k1] != -1 {
					x1 := v1[k1]
					y1 := off + x1 - k1
					if x1 >= n-x2 {
						return aLo + x1, bLo + y1, true
					}
				}
			}
		}
	}
	return 0, 0, false
}
