package workspace

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"strings"
)

// contextLines is the number of unchanged lines around each change.
const contextLines = 3

// writeHunks writes unified-diff hunks turning lines a into lines b.
func writeHunks(out *strings.Builder, a, b []string) {
	delA, insB := diffLines(a, b)
	// ops: walk both sides; op 0 keeps a[i]==b[j], -1 deletes a[i], +1
	// inserts b[j].
	type op struct{ kind, i, j int }
	var ops []op
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && delA[i]:
			ops = append(ops, op{-1, i, j})
			i++
		case j < len(b) && insB[j]:
			ops = append(ops, op{1, i, j})
			j++
		default:
			ops = append(ops, op{0, i, j})
			i++
			j++
		}
	}
	for k := 0; k < len(ops); {
		if ops[k].kind == 0 {
			k++
			continue
		}
		// A hunk starts contextLines before the first change and runs until
		// a gap of more than 2*contextLines unchanged lines.
		start := max(0, k-contextLines)
		end := k
		for end < len(ops) {
			if ops[end].kind != 0 {
				end++
				continue
			}
			gap := end
			for gap < len(ops) && ops[gap].kind == 0 {
				gap++
			}
			if gap == len(ops) || gap-end > 2*contextLines {
				end = min(len(ops), end+contextLines)
				break
			}
			end = gap
		}
		hunk := ops[start:end]
		var oldN, newN int
		for _, o := range hunk {
			if o.kind <= 0 {
				oldN++
			}
			if o.kind >= 0 {
				newN++
			}
		}
		fmt.Fprintf(out, "@@ -%s +%s @@\n", hunkRange(hunk[0].i, oldN), hunkRange(hunk[0].j, newN))
		for _, o := range hunk {
			switch o.kind {
			case 0:
				writeLine(out, ' ', a[o.i])
			case -1:
				writeLine(out, '-', a[o.i])
			case 1:
				writeLine(out, '+', b[o.j])
			}
		}
		k = end
	}
}

// hunkRange formats "start,count" the way git does: 1-based start, the
// count left out when it is 1, and the line before when it is 0.
func hunkRange(start0, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", start0)
	case 1:
		return fmt.Sprintf("%d", start0+1)
	}
	return fmt.Sprintf("%d,%d", start0+1, n)
}

func writeLine(out *strings.Builder, prefix byte, line string) {
	out.WriteByte(prefix)
	out.WriteString(line)
	if !strings.HasSuffix(line, "\n") {
		out.WriteString("\n\\ No newline at end of file\n")
	}
}

// writeBinaryLiteral writes one "literal" hunk of a GIT binary patch: the
// zlib-deflated data in git's base-85 lines of up to 52 bytes.
func writeBinaryLiteral(out *strings.Builder, data []byte) {
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	_, _ = zw.Write(data)
	_ = zw.Close()
	fmt.Fprintf(out, "literal %d\n", len(data))
	buf := z.Bytes()
	for len(buf) > 0 {
		n := min(52, len(buf))
		if n <= 26 {
			out.WriteByte(byte('A' + n - 1))
		} else {
			out.WriteByte(byte('a' + n - 27))
		}
		encode85(out, buf[:n])
		out.WriteByte('\n')
		buf = buf[n:]
	}
	out.WriteByte('\n')
}

const alphabet85 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"

// encode85 is git's base-85: each group of 4 bytes (the last zero-padded),
// big-endian, as 5 digits, most significant first.
func encode85(out *strings.Builder, data []byte) {
	for len(data) > 0 {
		var acc uint32
		for i := 0; i < 4; i++ {
			acc <<= 8
			if i < len(data) {
				acc |= uint32(data[i])
			}
		}
		var digits [5]byte
		for i := 4; i >= 0; i-- {
			digits[i] = alphabet85[acc%85]
			acc /= 85
		}
		out.Write(digits[:])
		data = data[min(4, len(data)):]
	}
}
