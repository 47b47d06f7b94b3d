package diff

import (
	"fmt"
	"strings"
	"testing"
)

// benchFile is a 5,000-line Go-like file.
func benchFile() string {
	var b strings.Builder
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&b, "func f%d(x int) int {\n\ty := x * %d\n\tif y > 10 {\n\t\treturn y\n\t}\n", i, i)
	}
	return b.String()
}

func BenchmarkUnifiedDiff(b *testing.B) {
	before := benchFile()
	after := strings.ReplaceAll(before, "y := x * 5", "y := x + 5") // ~111 scattered changes
	b.ReportAllocs()
	for b.Loop() {
		Unified("f.go", []byte(before), []byte(after))
	}
}
