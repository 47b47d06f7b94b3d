package shim

// capture keeps the first and last bytes written to it, up to max in all,
// and counts what fell out of the middle.
type capture struct {
	max   int
	head  []byte
	tail  []byte // ring buffer of capacity max-headCap once full
	start int    // index of the oldest byte in tail when full
	total int64
}

func newCapture(max int) *capture {
	return &capture{max: max}
}

func (c *capture) headCap() int { return c.max - c.max/2 }
func (c *capture) tailCap() int { return c.max / 2 }

// Write never fails.
func (c *capture) Write(p []byte) (int, error) {
	n := len(p)
	c.total += int64(n)
	if room := c.headCap() - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	tc := c.tailCap()
	if len(p) == 0 || tc == 0 {
		return n, nil
	}
	if len(p) >= tc {
		c.tail = append(c.tail[:0], p[len(p)-tc:]...)
		c.start = 0
		return n, nil
	}
	if room := tc - len(c.tail); room > 0 {
		k := min(room, len(p))
		c.tail = append(c.tail, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 { // tail is full: overwrite the oldest bytes
		k := copy(c.tail[c.start:], p)
		p = p[k:]
		c.start = (c.start + k) % tc
	}
	return n, nil
}

// Bytes returns head then tail, and how many bytes were dropped between.
func (c *capture) Bytes() ([]byte, int64) {
	out := make([]byte, 0, len(c.head)+len(c.tail))
	out = append(out, c.head...)
	out = append(out, c.tail[c.start:]...)
	out = append(out, c.tail[:c.start]...)
	return out, c.total - int64(len(out))
}
