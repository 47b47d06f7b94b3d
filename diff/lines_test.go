package diff

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// applyFlags rebuilds b from a and the diff flags, to check the script.
func applyFlags(a, b []string, delA, insB []bool) []string {
	var out []string
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && delA[i]:
			i++
		case j < len(b) && insB[j]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

func TestLines(t *testing.T) {
	tests := []struct{ name, a, b string }{
		{"equal", "a b c", "a b c"},
		{"insert middle", "a b c", "a b x c"},
		{"delete middle", "a b c", "a c"},
		{"replace all", "a b c", "x y z"},
		{"from empty", "", "a b"},
		{"to empty", "a b", ""},
		{"swap", "a b", "b a"},
		{"interleaved", "a b c a b b a", "c b a b a c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := strings.Fields(tt.a), strings.Fields(tt.b)
			delA, insB := Lines(a, b)
			if got := applyFlags(a, b, delA, insB); strings.Join(got, " ") != strings.Join(b, " ") {
				t.Fatalf("script rebuilds %q, want %q", got, b)
			}
			kept := 0
			for _, d := range delA {
				if !d {
					kept++
				}
			}
			if want := lcsLen(a, b); kept != want {
				t.Errorf("kept %d lines, want the LCS %d", kept, want)
			}
		})
	}
}

func TestLinesRandomMinimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 300; iter++ {
		gen := func() []string {
			out := make([]string, rng.IntN(40))
			for i := range out {
				out[i] = string(rune('a' + rng.IntN(4)))
			}
			return out
		}
		a, b := gen(), gen()
		delA, insB := Lines(a, b)
		if got := applyFlags(a, b, delA, insB); strings.Join(got, "") != strings.Join(b, "") {
			t.Fatalf("a=%v b=%v: rebuilt %v", a, b, got)
		}
		kept := 0
		for _, d := range delA {
			if !d {
				kept++
			}
		}
		if want := lcsLen(a, b); kept != want {
			t.Fatalf("a=%v b=%v: kept %d, LCS %d", a, b, kept, want)
		}
	}
}
