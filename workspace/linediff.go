package workspace

// Line diff for unified patches: Myers' O(ND) algorithm in linear space
// (divide and conquer on the middle snake). When a region needs more than
// maxSnakeCost edits on each side, it is reported as wholly replaced: the
// patch stays correct, only larger than minimal.

const maxSnakeCost = 1024

// lineDiff marks which lines of a are deleted and which of b are inserted.
type lineDiff struct {
	a, b       []int // interned lines
	delA, insB []bool
	vf, vb     []int
}

// diffLines compares two line slices and returns the deleted/inserted flags.
func diffLines(a, b []string) (delA, insB []bool) {
	ids := map[string]int{}
	intern := func(ls []string) []int {
		out := make([]int, len(ls))
		for i, l := range ls {
			id, ok := ids[l]
			if !ok {
				id = len(ids)
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	d := &lineDiff{a: intern(a), b: intern(b), delA: make([]bool, len(a)), insB: make([]bool, len(b))}
	d.compare(0, len(a), 0, len(b))
	return d.delA, d.insB
}

func (d *lineDiff) compare(aLo, aHi, bLo, bHi int) {
	for aLo < aHi && bLo < bHi && d.a[aLo] == d.b[bLo] {
		aLo++
		bLo++
	}
	for aLo < aHi && bLo < bHi && d.a[aHi-1] == d.b[bHi-1] {
		aHi--
		bHi--
	}
	switch {
	case aLo == aHi:
		for j := bLo; j < bHi; j++ {
			d.insB[j] = true
		}
		return
	case bLo == bHi:
		for i := aLo; i < aHi; i++ {
			d.delA[i] = true
		}
		return
	}
	x0, y0, x1, y1, ok := d.middleSnake(aLo, aHi, bLo, bHi)
	if !ok {
		for i := aLo; i < aHi; i++ {
			d.delA[i] = true
		}
		for j := bLo; j < bHi; j++ {
			d.insB[j] = true
		}
		return
	}
	d.compare(aLo, x0, bLo, y0)
	d.compare(x1, aHi, y1, bHi)
}

// middleSnake finds the middle snake (x0,y0)-(x1,y1), in absolute
// coordinates, of an optimal edit path between a[aLo:aHi] and b[bLo:bHi].
// Both ranges are non-empty and differ in their first and last lines.
func (d *lineDiff) middleSnake(aLo, aHi, bLo, bHi int) (x0, y0, x1, y1 int, ok bool) {
	n, m := aHi-aLo, bHi-bLo
	maxD := (n+m+1)/2 + 1
	limit := maxD
	if limit > maxSnakeCost {
		limit = maxSnakeCost
	}
	size := 2*limit + 3
	if cap(d.vf) < size {
		d.vf = make([]int, size)
		d.vb = make([]int, size)
	}
	vf, vb := d.vf[:size], d.vb[:size]
	off := limit + 1
	for i := range vf {
		vf[i] = -1
		vb[i] = -1
	}
	delta := n - m
	odd := delta&1 != 0
	a, b := d.a, d.b
	vf[off+1], vb[off+1] = 0, 0
	for D := 0; D <= limit; D++ {
		// Forward: furthest x on diagonal k = x - y.
		for k := -D; k <= D; k += 2 {
			var x int
			if k == -D || (k != D && vf[off+k-1] < vf[off+k+1]) {
				x = vf[off+k+1]
			} else {
				x = vf[off+k-1] + 1
			}
			y := x - k
			sx, sy := x, y
			for x < n && y < m && a[aLo+x] == b[bLo+y] {
				x++
				y++
			}
			vf[off+k] = x
			// Reverse diagonal of k is delta-k; it was reached in D-1 steps.
			if kr := delta - k; odd && kr >= -(D-1) && kr <= D-1 && vb[off+kr] >= 0 && x+vb[off+kr] >= n {
				return aLo + sx, bLo + sy, aLo + x, bLo + y, true
			}
		}
		// Reverse: furthest x' on diagonal k' of the reversed sequences.
		for k := -D; k <= D; k += 2 {
			var x int
			if k == -D || (k != D && vb[off+k-1] < vb[off+k+1]) {
				x = vb[off+k+1]
			} else {
				x = vb[off+k-1] + 1
			}
			y := x - k
			sx, sy := x, y
			for x < n && y < m && a[aHi-1-x] == b[bHi-1-y] {
				x++
				y++
			}
			vb[off+k] = x
			if kf := delta - k; !odd && kf >= -D && kf <= D && vf[off+kf] >= 0 && x+vf[off+kf] >= n {
				return aHi - x, bHi - y, aHi - sx, bHi - sy, true
			}
		}
	}
	return 0, 0, 0, 0, false
}
