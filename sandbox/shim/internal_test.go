package shim

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func TestCapture(t *testing.T) {
	tests := []struct {
		name        string
		max         int
		writes      []string
		want        string
		wantDropped int64
	}{
		{"fits", 10, []string{"abc", "def"}, "abcdef", 0},
		{"exact", 6, []string{"abcdef"}, "abcdef", 0},
		{"one big write", 6, []string{"abcdefghij"}, "abchij", 4},
		{"many small writes", 6, []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}, "abchij", 4},
		{"wrap across writes", 7, []string{"abcd", "efgh", "ijk", "lm"}, "abcdklm", 6},
		{"odd max keeps more head", 5, []string{"0123456789"}, "01289", 5},
		{"max 1", 1, []string{"xyz"}, "x", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCapture(tt.max)
			for _, w := range tt.writes {
				c.Write([]byte(w))
			}
			got, dropped := c.Bytes()
			if string(got) != tt.want || dropped != tt.wantDropped {
				t.Errorf("got %q dropped %d, want %q dropped %d", got, dropped, tt.want, tt.wantDropped)
			}
		})
	}
}

// Every split of the same input gives the same head and tail.
func TestCaptureSplits(t *testing.T) {
	in := []byte(strings.Repeat("0123456789abcdefghij", 7))
	ref := newCapture(33)
	ref.Write(in)
	want, wantDropped := ref.Bytes()
	if !bytes.Equal(want, append(append([]byte{}, in[:17]...), in[len(in)-16:]...)) {
		t.Fatalf("reference capture = %q", want)
	}
	for step := 1; step < 40; step++ {
		c := newCapture(33)
		for i := 0; i < len(in); i += step {
			c.Write(in[i:min(i+step, len(in))])
		}
		got, dropped := c.Bytes()
		if !bytes.Equal(got, want) || dropped != wantDropped {
			t.Errorf("step %d: got %q (%d)", step, got, dropped)
		}
	}
}

func TestExpandBraces(t *testing.T) {
	tests := map[string][]string{
		"*.go":         {"*.go"},
		"*.{go,md}":    {"*.go", "*.md"},
		"{a,b}/{c,d}":  {"a/c", "a/d", "b/c", "b/d"},
		"x{a,{b,c}}y":  {"xay", "xby", "xcy"},
		"unclosed{a,b": {"unclosed{a,b"},
		"{single}.txt": {"single.txt"},
		"":             {""},
	}
	for in, want := range tests {
		got := expandBraces(in)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("expandBraces(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMatchSegs(t *testing.T) {
	tests := []struct {
		pat, path string
		want      bool
	}{
		{"**", "a/b/c", true},
		{"**/*.go", "x.go", true},
		{"**/*.go", "a/b/x.go", true},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"a/**/b", "a/x/y/c", false},
		{"*.go", "a/x.go", false},
		{"a/*", "a/b/c", false},
	}
	for _, tt := range tests {
		if got := matchSegs(strings.Split(tt.pat, "/"), strings.Split(tt.path, "/")); got != tt.want {
			t.Errorf("matchSegs(%q, %q) = %v", tt.pat, tt.path, got)
		}
	}
}
