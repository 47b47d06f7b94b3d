package diff

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
