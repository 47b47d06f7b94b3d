package diff

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"strings"
)

// IsBinary uses git's rule: a NUL byte in the first 8000 bytes.
func IsBinary(data []byte) bool {
	return bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0
}

// WriteBinary writes a "GIT binary patch" turning old into new: a literal
// of the new content, then one of the old (for reverse application).
func WriteBinary(out *strings.Builder, old, new []byte) {
	out.WriteString("GIT binary patch\n")
	writeBinaryLiteral(out, new)
	writeBinaryLiteral(out, old)
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

// QuotePath quotes a path the way git does when it holds control
// characters, quotes, backslashes or non-ASCII bytes; other paths are
// returned as they are.
func QuotePath(p string) string {
	needs := false
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			needs = true
			break
		}
	}
	if !needs {
		return p
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		writeQuoted(&b, p[i])
	}
	b.WriteByte('"')
	return b.String()
}

// escapes are the C escapes git uses in quoted paths.
var escapes = map[byte]string{
	'\a': `\a`, '\b': `\b`, '\t': `\t`, '\n': `\n`, '\v': `\v`, '\f': `\f`, '\r': `\r`,
	'"': `\"`, '\\': `\\`,
}

func writeQuoted(b *strings.Builder, c byte) {
	switch e, ok := escapes[c]; {
	case ok:
		b.WriteString(e)
	case c < 0x20 || c >= 0x7f:
		fmt.Fprintf(b, `\%03o`, c)
	default:
		b.WriteByte(c)
	}
}
