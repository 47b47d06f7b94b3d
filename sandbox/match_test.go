package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

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

func TestRel(t *testing.T) {
	tests := []struct {
		in, want string
		err      error
	}{
		{"", ".", nil},
		{".", ".", nil},
		{"a/../b/./c", "b/c", nil},
		{"/workspace", ".", nil},
		{"/workspace/", ".", nil},
		{"/workspace/a/b", "a/b", nil},
		{"/workspace2/a", "", ErrEscape},
		{"/etc/passwd", "", ErrEscape},
		{"..", "", ErrEscape},
		{"a/../../b", "", ErrEscape},
		{"a\x00b", "", fs.ErrInvalid},
	}
	for _, tt := range tests {
		got, err := Rel(WorkDir, tt.in)
		if got != tt.want || !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
			t.Errorf("Rel(%q) = %q, %v; want %q, %v", tt.in, got, err, tt.want, tt.err)
		}
	}
	if _, err := Rel(WorkDir, "/etc"); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("an escape is not a permission error: %v", err)
	}
}

func TestParseGlob(t *testing.T) {
	tests := []struct {
		pattern, dir string
		match        []string
		miss         []string
		depth        int
	}{
		{"*.go", ".", []string{"a.go"}, []string{"a/b.go", "a.md"}, 1},
		{"**/*.go", ".", []string{"a.go", "a/b/c.go"}, []string{"a.md"}, 0},
		{"*.{go,md}", ".", []string{"a.go", "a.md"}, []string{"a.txt"}, 1},
		{"{src,lib}/*", ".", []string{"src/x", "lib/y"}, []string{"doc/x", "src/x/y"}, 2},
		{"./*.go", ".", []string{"a.go"}, nil, 1},
		{"/workspace/.github/*.yml", ".", []string{".github/ci.yml"}, []string{"github/ci.yml"}, 2},
		{"/workspace/src/*.go", "src", []string{"a.go"}, []string{"src/a.go"}, 1},
	}
	for _, tt := range tests {
		g, err := ParseGlob(WorkDir, tt.pattern, tt.dir)
		if err != nil {
			t.Fatalf("ParseGlob(%q): %v", tt.pattern, err)
		}
		for _, m := range tt.match {
			if !g.Match(m) {
				t.Errorf("%q does not match %q", tt.pattern, m)
			}
		}
		for _, m := range tt.miss {
			if g.Match(m) {
				t.Errorf("%q matches %q", tt.pattern, m)
			}
		}
		if g.Depth() != tt.depth {
			t.Errorf("%q: Depth = %d, want %d", tt.pattern, g.Depth(), tt.depth)
		}
	}
	if _, err := ParseGlob(WorkDir, "[", "."); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("ParseGlob([) = %v, want fs.ErrInvalid", err)
	}
	if _, err := ParseGlob(WorkDir, "/etc/*", "."); !errors.Is(err, ErrEscape) {
		t.Errorf("ParseGlob(/etc/*) = %v, want ErrEscape", err)
	}
}

func TestParseInclude(t *testing.T) {
	inc, err := ParseInclude("*.{go,md}")
	if err != nil {
		t.Fatal(err)
	}
	if !inc.Match("deep/x/a.go") || !inc.Match("README.md") || inc.Match("a.txt") {
		t.Error("a name filter matches by file name at any depth")
	}
	inc, _ = ParseInclude("src/**/*.go")
	if !inc.Match("src/a.go") || !inc.Match("src/x/a.go") || inc.Match("lib/a.go") {
		t.Error("a filter with / matches the relative path")
	}
	if inc, _ := ParseInclude(""); !inc.Match("anything") {
		t.Error("the empty filter matches everything")
	}
	if _, err := ParseInclude("[x"); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("ParseInclude([x) = %v", err)
	}
}

func TestCompareWalk(t *testing.T) {
	paths := []string{"a.go", "b", "a/b.go", "a", "a/a/z", "a-b", "A"}
	slices.SortFunc(paths, CompareWalk)
	want := []string{"A", "a", "a/a/z", "a/b.go", "a-b", "a.go", "b"}
	if !slices.Equal(paths, want) {
		t.Errorf("walk order %q, want %q", paths, want)
	}
}

func TestMatchLines(t *testing.T) {
	re := regexp.MustCompile("x")
	got := MatchLines(re, "f", []byte("x1\r\nno\nx3"), nil, 10)
	want := []GrepMatch{{"f", 1, "x1"}, {"f", 3, "x3"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MatchLines = %+v", got)
	}
	if got := MatchLines(regexp.MustCompile("^$"), "f", []byte("a\n"), nil, 10); len(got) != 0 {
		t.Errorf("a final newline makes no empty line: %+v", got)
	}
	if got := MatchLines(re, "f", []byte("x\x00x\n"), nil, 10); len(got) != 0 {
		t.Errorf("binary data matched: %+v", got)
	}
	if got := MatchLines(re, "f", []byte("x\nx\nx\n"), nil, 2); len(got) != 2 {
		t.Errorf("limit not kept: %+v", got)
	}
	long := strings.Repeat("é", MaxMatchText)
	if got := MatchLines(regexp.MustCompile("é"), "f", []byte(long), nil, 1); len(got[0].Text) > MaxMatchText+len("…") || !strings.HasSuffix(got[0].Text, "…") {
		t.Errorf("long line not clipped: %d bytes", len(got[0].Text))
	}
}

func TestBroken(t *testing.T) {
	for kind, want := range map[ErrorKind]bool{ErrGone: true, ErrLimit: true, ErrUnavailable: true, ErrInvalid: false, ErrImageMissing: false} {
		err := fmt.Errorf("wrapped: %w", &Error{Kind: kind, Op: "exec", Err: errors.New("x")})
		if Broken(err) != want {
			t.Errorf("Broken(%s) = %v", kind, !want)
		}
	}
	if Broken(fs.ErrNotExist) || Broken(nil) {
		t.Error("an operation's error is not a broken sandbox")
	}
}
