package shim_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/shim"
)

// tree writes files (path -> content) under dir.
func tree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadWrite(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	tree(t, outside, map[string]string{"secret": "s"})
	tree(t, dir, map[string]string{"a.txt": "A", "d/b.txt": "B"})
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "out-link"))
	os.Symlink("a.txt", filepath.Join(dir, "in-link"))
	c := startShim(t, dir, shim.Options{})
	ctx := context.Background()

	reads := []struct {
		path    string
		want    string
		wantErr error
	}{
		{"a.txt", "A", nil},
		{"./d/../a.txt", "A", nil},
		{filepath.Join(dir, "d/b.txt"), "B", nil},
		{"in-link", "A", nil},
		{"missing", "", fs.ErrNotExist},
		{"d", "", sandbox.ErrIsDir},
		{"../x", "", sandbox.ErrEscape},
		{"/etc/passwd", "", sandbox.ErrEscape},
		{"out-link", "", sandbox.ErrEscape},
	}
	for _, tt := range reads {
		got, err := c.ReadFile(ctx, tt.path)
		if !errors.Is(err, tt.wantErr) || string(got) != tt.want {
			t.Errorf("ReadFile(%q) = %q, %v; want %q, %v", tt.path, got, err, tt.want, tt.wantErr)
		}
	}

	binary := []byte{0, 1, 2, 0xff, 0xfe, '\n', 0xc3, 0x28}
	writes := []struct {
		path     string
		mode     fs.FileMode
		wantMode fs.FileMode
		wantErr  error
	}{
		{"new/deep/file.bin", 0, 0o644, nil},
		{"script.sh", 0o755, 0o755, nil},
		{"d", 0, 0, sandbox.ErrIsDir},
		{"../escape", 0, 0, sandbox.ErrEscape},
		{"out-link", 0, 0, sandbox.ErrEscape},
		{"out-dir-link/x", 0, 0, sandbox.ErrEscape},
	}
	os.Symlink(outside, filepath.Join(dir, "out-dir-link"))
	for _, tt := range writes {
		err := c.WriteFile(ctx, tt.path, binary, tt.mode)
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("WriteFile(%q) = %v, want %v", tt.path, err, tt.wantErr)
			continue
		}
		if err != nil {
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, tt.path))
		if err != nil || fi.Mode().Perm() != tt.wantMode {
			t.Errorf("after WriteFile(%q): %v, %v; want mode %v", tt.path, fi.Mode(), err, tt.wantMode)
		}
		got, _ := c.ReadFile(ctx, tt.path)
		if !bytes.Equal(got, binary) {
			t.Errorf("ReadFile(%q) after write = %v", tt.path, got)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "x")); err == nil {
		t.Error("a write escaped through a directory link")
	}

	// Mode 0 keeps an existing file's mode.
	if err := c.WriteFile(ctx, "script.sh", []byte("echo"), 0); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "script.sh")); fi.Mode().Perm() != 0o755 {
		t.Errorf("mode after rewrite = %v, want 0755", fi.Mode())
	}
	// Empty file reads as empty, not nil.
	c.WriteFile(ctx, "empty", nil, 0)
	if got, err := c.ReadFile(ctx, "empty"); err != nil || got == nil || len(got) != 0 {
		t.Errorf("ReadFile(empty) = %v, %v", got, err)
	}
}

func TestRemoveStatList(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, map[string]string{"b": "bb", "a": "a", "d/x": "x", ".hidden": ""})
	c := startShim(t, dir, shim.Options{})
	ctx := context.Background()

	if err := c.Remove(ctx, "d"); !errors.Is(err, sandbox.ErrIsDir) {
		t.Errorf("Remove(dir) = %v, want ErrIsDir", err)
	}
	if err := c.Remove(ctx, "missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Remove(missing) = %v", err)
	}
	if err := c.Remove(ctx, "../x"); !errors.Is(err, sandbox.ErrEscape) {
		t.Errorf("Remove(../x) = %v", err)
	}

	fi, err := c.Stat(ctx, "b")
	if err != nil || fi.Path != "b" || fi.Size != 2 || fi.IsDir || fi.Mode.Perm() != 0o644 || fi.ModTime.IsZero() {
		t.Errorf("Stat(b) = %+v, %v", fi, err)
	}
	if fi, err := c.Stat(ctx, ""); err != nil || !fi.IsDir || fi.Path != "." {
		t.Errorf("Stat(root) = %+v, %v", fi, err)
	}

	list, err := c.ListDir(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Path)
	}
	if want := []string{".hidden", "a", "b", "d"}; !reflect.DeepEqual(names, want) {
		t.Errorf("ListDir = %v, want %v", names, want)
	}
	if list, err := c.ListDir(ctx, "d"); err != nil || len(list) != 1 || list[0].Path != "d/x" {
		t.Errorf("ListDir(d) = %+v, %v", list, err)
	}
	if _, err := c.ListDir(ctx, "a"); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("ListDir(file) = %v, want ErrInvalid", err)
	}

	if err := c.Remove(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a still there: %v", err)
	}
}

func TestGlob(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, map[string]string{
		"main.go": "", "README.md": "", "pkg/a.go": "", "pkg/a_test.go": "", "pkg/sub/b.go": "",
		"docs/x.md": "", ".git/config": "", ".git/x.go": "", "vendor/.git/y.go": "",
	})
	c := startShim(t, dir, shim.Options{})
	tests := []struct {
		pattern, dir string
		want         []string
	}{
		{"*.go", "", []string{"main.go"}},
		{"**/*.go", "", []string{"main.go", "pkg/a.go", "pkg/a_test.go", "pkg/sub/b.go"}},
		{"pkg/**", "", []string{"pkg", "pkg/a.go", "pkg/a_test.go", "pkg/sub", "pkg/sub/b.go"}},
		{"*.go", "pkg", []string{"pkg/a.go", "pkg/a_test.go"}},
		{"**/*_test.go", "pkg", []string{"pkg/a_test.go"}},
		{"*.{md,go}", "", []string{"README.md", "main.go"}},
		{"*/*.md", "", []string{"docs/x.md"}},
		{"nothing*", "", []string{}},
	}
	for _, tt := range tests {
		got, err := c.Glob(context.Background(), tt.pattern, tt.dir)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Glob(%q, %q) = %q, %v; want %q", tt.pattern, tt.dir, got, err, tt.want)
		}
	}
	if _, err := c.Glob(context.Background(), "*", ".."); !errors.Is(err, sandbox.ErrEscape) {
		t.Errorf("Glob outside = %v", err)
	}
	if _, err := c.Glob(context.Background(), "[", ""); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("Glob bad pattern = %v", err)
	}
}

func TestGrep(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, map[string]string{
		"a.go":        "package a\nfunc Add() {}\n// TODO add\n",
		"b.md":        "TODO: docs\r\n",
		"sub/c.go":    "func Sub() {}\nTODO sub\n",
		"bin.dat":     "TODO\x00binary",
		".git/HEAD":   "TODO",
		"sub/d.py":    "# TODO py",
		"latin1.txt":  "TODO caf\xe9",
		"sub/e.go.md": "TODO",
	})
	c := startShim(t, dir, shim.Options{})
	tests := []struct {
		name string
		req  sandbox.GrepRequest
		want []sandbox.GrepMatch
	}{
		{"all", sandbox.GrepRequest{Pattern: "TODO"}, []sandbox.GrepMatch{
			{Path: "a.go", Line: 3, Text: "// TODO add"}, {Path: "b.md", Line: 1, Text: "TODO: docs"},
			{Path: "latin1.txt", Line: 1, Text: "TODO caf\uFFFD"}, // invalid UTF-8 replaced,
			{Path: "sub/c.go", Line: 2, Text: "TODO sub"}, {Path: "sub/d.py", Line: 1, Text: "# TODO py"},
			{Path: "sub/e.go.md", Line: 1, Text: "TODO"}}},
		{"include", sandbox.GrepRequest{Pattern: `^func \w+`, Include: "*.go"}, []sandbox.GrepMatch{
			{Path: "a.go", Line: 2, Text: "func Add() {}"}, {Path: "sub/c.go", Line: 1, Text: "func Sub() {}"}}},
		{"include braces", sandbox.GrepRequest{Pattern: "TODO", Include: "*.{py,md}"}, []sandbox.GrepMatch{
			{Path: "b.md", Line: 1, Text: "TODO: docs"}, {Path: "sub/d.py", Line: 1, Text: "# TODO py"}, {Path: "sub/e.go.md", Line: 1, Text: "TODO"}}},
		{"path", sandbox.GrepRequest{Pattern: "TODO", Path: "sub", Include: "*.go"}, []sandbox.GrepMatch{
			{Path: "sub/c.go", Line: 2, Text: "TODO sub"}}},
		{"file", sandbox.GrepRequest{Pattern: "func", Path: "a.go"}, []sandbox.GrepMatch{
			{Path: "a.go", Line: 2, Text: "func Add() {}"}}},
		{"max", sandbox.GrepRequest{Pattern: "TODO", MaxMatches: 2}, []sandbox.GrepMatch{
			{Path: "a.go", Line: 3, Text: "// TODO add"}, {Path: "b.md", Line: 1, Text: "TODO: docs"}}},
		{"none", sandbox.GrepRequest{Pattern: "nothing"}, []sandbox.GrepMatch{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.Grep(context.Background(), tt.req)
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Grep = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	if _, err := c.Grep(context.Background(), sandbox.GrepRequest{Pattern: "("}); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("Grep bad regexp = %v, want ErrInvalid", err)
	}
	if _, err := c.Grep(context.Background(), sandbox.GrepRequest{Pattern: "x", Path: "/etc"}); !errors.Is(err, sandbox.ErrEscape) {
		t.Errorf("Grep outside = %v, want ErrEscape", err)
	}
}

func TestUsage(t *testing.T) {
	dir := t.TempDir()
	c := startShim(t, dir, shim.Options{})
	before, err := c.Usage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tree(t, dir, map[string]string{"big": string(make([]byte, 1<<20))})
	os.Link(filepath.Join(dir, "big"), filepath.Join(dir, "big-link"))
	after, err := c.Usage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if grew := after - before; grew < 1<<20 || grew >= 2<<20 {
		t.Errorf("usage grew by %d for one 1 MiB file with two links", grew)
	}
}

func TestReadTooLarge(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, map[string]string{"big": "0123456789abcdefghij", "small": "ok"})
	c := startShim(t, dir, shim.Options{MaxReadFile: 10})
	if _, err := c.ReadFile(context.Background(), "big"); !errors.Is(err, shim.ErrTooLarge) {
		t.Fatalf("ReadFile(big) = %v, want ErrTooLarge", err)
	}
	if got, err := c.ReadFile(context.Background(), "small"); err != nil || string(got) != "ok" {
		t.Fatalf("ReadFile after a refused one = %q, %v", got, err)
	}
}
