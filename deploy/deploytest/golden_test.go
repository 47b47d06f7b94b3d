package deploytest

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden renders in testdata/render")

// TestChartGolden compares each scenario's full render with
// testdata/render/<scenario>.yaml (helm template's output, then the
// notes), so a change to the chart shows up as a reviewable diff of what
// Kubernetes would get. Run with -update to accept.
func TestChartGolden(t *testing.T) {
	c := loadChart(t, chartDir(t))
	nonWord := regexp.MustCompile(`[^a-z0-9]+`)
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			r, err := c.render(sc.values)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			b.WriteString("# values:\n# " + strings.ReplaceAll(strings.TrimSpace(sc.values), "\n", "\n# ") + "\n")
			b.WriteString(r.raw)
			b.WriteString("---\n# NOTES.txt\n# " + strings.ReplaceAll(strings.TrimSpace(r.notes), "\n", "\n# ") + "\n")
			file := filepath.Join("testdata", "render", strings.Trim(nonWord.ReplaceAllString(strings.ToLower(sc.name), "-"), "-")+".yaml")
			if *update {
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run go test -run TestChartGolden -update to create it)", err)
			}
			if string(want) != b.String() {
				t.Errorf("%s differs from the render; review the change and run with -update to accept.\n%s", file, firstDiff(string(want), b.String()))
			}
		})
	}
}

func stripComments(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// firstDiff shows the first differing line of two texts.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return "line " + itoa(i+1) + ":\n golden: " + x + "\n render: " + y
		}
	}
	return ""
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
