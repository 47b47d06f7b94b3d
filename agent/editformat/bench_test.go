package editformat

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

func BenchmarkApplyPatch(b *testing.B) {
	file := benchFile()
	patch := "*** Begin Patch\n*** Update File: f.go\n@@ func f900(x int) int {\n-\ty := x * 900\n+\ty := x * 901\n" +
		"@@\n \tif y > 10 {\n-\t\treturn y\n+\t\treturn -y\n*** End of File\n*** End Patch\n"
	read := func(string) ([]byte, error) { return []byte(file), nil }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ApplyPatch(patch, read, PatchOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkApplySearchReplace(b *testing.B) {
	file := []byte(benchFile())
	diff := "------- SEARCH\n    y := x * 900\n=======\n    y := x * 901\n+++++++ REPLACE\n" // needs a fallback
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ApplySearchReplace(file, diff); err != nil {
			b.Fatal(err)
		}
	}
}
