package diff

import "strings"

// budget bounds the work of one line diff (diagonals visited plus snake
// steps). Past it, the remaining differing region is shown as removed and
// re-added whole: still a correct diff, only not a minimal one.
const budget = 20_000_000

// Kinds of [Op].
const (
	Keep   = ' ' // the line is in both
	Delete = '-' // the line is only in a
	Insert = '+' // the line is only in b
)

// Op is one line of an edit script: Kind is [Keep], [Delete] or [Insert];
// A and B are the positions in a and b where it stands.
type Op struct {
	Kind byte
	A, B int
}

// SplitLines splits s after each "\n"; the last line may lack one. An
// empty s has no lines.
func SplitLines(s string) []string {
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// Lines compares two sequences of lines with Myers' linear-space algorithm
// and reports which lines of a are deleted and which lines of b are
// inserted; the rest are common, in order. Past a fixed work budget a
// region is reported as wholly replaced: still correct, not minimal.
func Lines(a, b []string) (deleted, inserted []bool) {
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
	d := &differ{a: intern(a), b: intern(b), budget: budget}
	d.del, d.ins = make([]bool, len(a)), make([]bool, len(b))
	d.compare(0, len(a), 0, len(b))
	return d.del, d.ins
}

// Script returns the edit script turning a into b: every line of both, in
// order, deletions before insertions at the same place.
func Script(a, b []string) []Op {
	del, ins := Lines(a, b)
	ops := make([]Op, 0, max(len(a), len(b)))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && del[i]:
			ops = append(ops, Op{Delete, i, j})
			i++
		case j < len(b) && ins[j]:
			ops = append(ops, Op{Insert, i, j})
			j++
		default:
			ops = append(ops, Op{Keep, i, j})
			i++
			j++
		}
	}
	return ops
}
