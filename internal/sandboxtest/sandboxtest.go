// Package sandboxtest is the contract every sandbox.Env implementation
// passes: the Docker sandbox (sandbox/docker), the shim it talks to
// (sandbox/shim, in process) and the in-memory fake (agent/memenv). The
// agent is tested against the fake and runs against Docker, so whatever
// the fake does differently (a glob it does not understand, another order,
// a missing-file error of another kind) would let tests pass that
// production fails; Run catches such differences.
//
// Each implementation calls [Run] from a test with a [Factory]. The suite
// uses only POSIX sh commands the fake also knows (echo, exit N, pwd, cat,
// sleep).
package sandboxtest

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"testing"

	"github.com/wrenchworks/wrench/sandbox"
)

// Factory returns a fresh Env whose workspace holds exactly files (path ->
// content, mode 0644, parents created), and removes it when t ends. root
// is the workspace's absolute path as the Env sees it (what pwd prints);
// empty means sandbox.WorkDir.
type Factory func(t *testing.T, files map[string]string) (env sandbox.Env, root string)

// open makes an Env with newEnv and returns it with its root.
func open(t *testing.T, newEnv Factory, files map[string]string) (sandbox.Env, string) {
	t.Helper()
	env, root := newEnv(t, files)
	if root == "" {
		root = sandbox.WorkDir
	}
	return env, root
}

// Run runs the contract against environments made by newEnv, one per
// subtest.
func Run(t *testing.T, newEnv Factory) {
	t.Run("ReadWrite", func(t *testing.T) { testReadWrite(t, newEnv) })
	t.Run("Modes", func(t *testing.T) { testModes(t, newEnv) })
	t.Run("RemoveStat", func(t *testing.T) { testRemoveStat(t, newEnv) })
	t.Run("ListDir", func(t *testing.T) { testListDir(t, newEnv) })
	t.Run("Escapes", func(t *testing.T) { testEscapes(t, newEnv) })
	t.Run("Glob", func(t *testing.T) { testGlob(t, newEnv) })
	t.Run("Grep", func(t *testing.T) { testGrep(t, newEnv) })
	t.Run("Exec", func(t *testing.T) { testExec(t, newEnv) })
}

// wantErr checks that err matches every one of targets (and is non-nil).
func wantErr(t *testing.T, what string, err error, targets ...error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want %v", what, targets)
		return
	}
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Errorf("%s = %v, want an error matching %v", what, err, target)
		}
	}
}

func testReadWrite(t *testing.T, newEnv Factory) {
	ctx := context.Background()
	env, root := open(t, newEnv, map[string]string{"a.txt": "A\n", "dir/b.txt": "B\n", "empty": ""})
	for _, p := range []string{"a.txt", root + "/a.txt", "./a.txt", "dir/../a.txt"} {
		if b, err := env.ReadFile(ctx, p); err != nil || string(b) != "A\n" {
			t.Errorf("ReadFile(%q) = %q, %v", p, b, err)
		}
	}
	if b, err := env.ReadFile(ctx, "empty"); err != nil || len(b) != 0 {
		t.Errorf("ReadFile(empty) = %q, %v", b, err)
	}
	_, err := env.ReadFile(ctx, "missing.txt")
	wantErr(t, "ReadFile(missing)", err, fs.ErrNotExist)
	_, err = env.ReadFile(ctx, "dir")
	wantErr(t, "ReadFile(dir)", err, sandbox.ErrIsDir)

	if err := env.WriteFile(ctx, "new/deep/c.txt", []byte("C"), 0); err != nil {
		t.Fatalf("WriteFile with missing parents: %v", err)
	}
	if b, err := env.ReadFile(ctx, "new/deep/c.txt"); err != nil || string(b) != "C" {
		t.Errorf("read back = %q, %v", b, err)
	}
	if fi, err := env.Stat(ctx, "new/deep"); err != nil || !fi.IsDir {
		t.Errorf("parent after WriteFile = %+v, %v", fi, err)
	}
	if err := env.WriteFile(ctx, root+"/a.txt", []byte("A2"), 0); err != nil {
		t.Fatal(err)
	}
	if b, _ := env.ReadFile(ctx, "a.txt"); string(b) != "A2" {
		t.Errorf("overwrite by absolute path: %q", b)
	}
	wantErr(t, "WriteFile(dir)", env.WriteFile(ctx, "dir", []byte("x"), 0), sandbox.ErrIsDir)
	wantErr(t, "WriteFile(root)", env.WriteFile(ctx, "", []byte("x"), 0), sandbox.ErrIsDir)
	if err := env.WriteFile(ctx, "a.txt/under", []byte("x"), 0); err == nil {
		t.Error("WriteFile under a file succeeded")
	}
}

func testModes(t *testing.T, newEnv Factory) {
	ctx := context.Background()
	env, _ := open(t, newEnv, map[string]string{"plain": "p\n"})
	perm := func(p string) fs.FileMode {
		t.Helper()
		fi, err := env.Stat(ctx, p)
		if err != nil {
			t.Fatalf("Stat(%s): %v", p, err)
		}
		return fi.Mode.Perm()
	}
	if m := perm("plain"); m != 0o644 {
		t.Errorf("a given file has mode %v, want 0644", m)
	}
	if err := env.WriteFile(ctx, "new", []byte("n"), 0); err != nil {
		t.Fatal(err)
	}
	if m := perm("new"); m != 0o644 {
		t.Errorf("a new file written with mode 0 has %v, want 0644", m)
	}
	if err := env.WriteFile(ctx, "run.sh", []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if m := perm("run.sh"); m != 0o755 {
		t.Errorf("written with 0755, has %v", m)
	}
	if err := env.WriteFile(ctx, "run.sh", []byte("#!/bin/sh\necho\n"), 0); err != nil {
		t.Fatal(err)
	}
	if m := perm("run.sh"); m != 0o755 {
		t.Errorf("mode 0 must keep the existing 0755, has %v", m)
	}
	if err := env.WriteFile(ctx, "plain", []byte("q\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if m := perm("plain"); m != 0o600 {
		t.Errorf("an explicit mode applies to an existing file: %v, want 0600", m)
	}
}

func testRemoveStat(t *testing.T, newEnv Factory) {
	ctx := context.Background()
	env, root := open(t, newEnv, map[string]string{"a.txt": "12345", "dir/b.txt": "B"})
	fi, err := env.Stat(ctx, root+"/a.txt")
	if err != nil || fi.Path != "a.txt" || fi.Size != 5 || fi.IsDir || !fi.Mode.IsRegular() || fi.ModTime.IsZero() {
		t.Errorf("Stat(file) = %+v, %v", fi, err)
	}
	fi, err = env.Stat(ctx, "dir")
	if err != nil || fi.Path != "dir" || !fi.IsDir || !fi.Mode.IsDir() {
		t.Errorf("Stat(dir) = %+v, %v", fi, err)
	}
	for _, root := range []string{"", ".", root} {
		if fi, err := env.Stat(ctx, root); err != nil || fi.Path != "." || !fi.IsDir {
			t.Errorf("Stat(%q) = %+v, %v", root, fi, err)
		}
	}
	_, err = env.Stat(ctx, "missing")
	wantErr(t, "Stat(missing)", err, fs.ErrNotExist)

	if err := env.Remove(ctx, "a.txt"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	_, err = env.Stat(ctx, "a.txt")
	wantErr(t, "Stat after Remove", err, fs.ErrNotExist)
	wantErr(t, "Remove again", env.Remove(ctx, "a.txt"), fs.ErrNotExist)
	wantErr(t, "Remove(dir)", env.Remove(ctx, "dir"), sandbox.ErrIsDir)
	if _, err := env.ReadFile(ctx, "dir/b.txt"); err != nil {
		t.Errorf("a refused Remove(dir) touched its contents: %v", err)
	}
}

func testListDir(t *testing.T, newEnv Factory) {
	ctx := context.Background()
	env, root := open(t, newEnv, map[string]string{
		"b.txt": "b", "a/x.go": "x", "a/y/z.go": "z", "c": "c", "B.md": "B", ".hidden": "h", "a.go": "a",
	})
	names := func(list []sandbox.FileInfo) []string {
		var out []string
		for _, fi := range list {
			out = append(out, fi.Path)
		}
		return out
	}
	for _, root := range []string{"", ".", root} {
		list, err := env.ListDir(ctx, root)
		if err != nil {
			t.Fatalf("ListDir(%q): %v", root, err)
		}
		if got, want := names(list), []string{".hidden", "B.md", "a", "a.go", "b.txt", "c"}; !slices.Equal(got, want) {
			t.Errorf("ListDir(%q) = %q, want %q (sorted by name)", root, got, want)
		}
		for _, fi := range list {
			if fi.IsDir != (fi.Path == "a") {
				t.Errorf("ListDir: %s IsDir = %v", fi.Path, fi.IsDir)
			}
			if fi.Path == "b.txt" && (fi.Size != 1 || fi.Mode.Perm() != 0o644) {
				t.Errorf("ListDir: b.txt = %+v", fi)
			}
		}
	}
	list, err := env.ListDir(ctx, "a")
	if got, want := names(list), []string{"a/x.go", "a/y"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("ListDir(a) = %q, %v; want %q", got, err, want)
	}
	_, err = env.ListDir(ctx, "b.txt")
	wantErr(t, "ListDir(file)", err, sandbox.ErrNotDir, fs.ErrInvalid)
	_, err = env.ListDir(ctx, "missing")
	wantErr(t, "ListDir(missing)", err, fs.ErrNotExist)
}

func testEscapes(t *testing.T, newEnv Factory) {
	ctx := context.Background()
	env, root := open(t, newEnv, map[string]string{"a.txt": "A"})
	for _, p := range []string{"../x", "a/../../x", "/etc/passwd", root + "/../etc/passwd", root + "2/x"} {
		_, err := env.ReadFile(ctx, p)
		wantErr(t, "ReadFile("+p+")", err, sandbox.ErrEscape, fs.ErrPermission)
		wantErr(t, "WriteFile("+p+")", env.WriteFile(ctx, p, []byte("x"), 0), sandbox.ErrEscape, fs.ErrPermission)
		wantErr(t, "Remove("+p+")", env.Remove(ctx, p), sandbox.ErrEscape)
		_, err = env.Stat(ctx, p)
		wantErr(t, "Stat("+p+")", err, sandbox.ErrEscape)
		_, err = env.ListDir(ctx, p)
		wantErr(t, "ListDir("+p+")", err, sandbox.ErrEscape)
		_, err = env.Glob(ctx, "*", p)
		wantErr(t, "Glob(dir "+p+")", err, sandbox.ErrEscape)
		_, err = env.Grep(ctx, sandbox.GrepRequest{Pattern: "x", Path: p})
		wantErr(t, "Grep(path "+p+")", err, sandbox.ErrEscape)
		_, err = env.Exec(ctx, sandbox.ExecRequest{Command: "pwd", Dir: p})
		wantErr(t, "Exec(dir "+p+")", err, sandbox.ErrEscape)
	}
	_, err := env.Glob(ctx, "/etc/*", "")
	wantErr(t, "Glob(/etc/*)", err, sandbox.ErrEscape)
}

// searchTree is the tree Glob and Grep search: upper case sorts before
// lower, and a directory's contents come before a sibling file that
// extends its name ("a/…" before "a.go").
var searchTree = map[string]string{
	"README.md":         "TODO readme\n",
	"a.go":              "package a\n// TODO one\n",
	"a.md":              "nothing\n",
	"a/b.go":            "// TODO two\r\n",
	"a/c/d.go":          "package c\n",
	"notes.txt":         "x\n\ny\nTODO last",
	"sub/e.py":          "# TODO three",
	"sub/.git/config":   "TODO hidden",
	".git/HEAD":         "TODO hidden\n",
	"bin.dat":           "TODO\x00binary\n",
	"sub/deeper/f.go":   "func f() {} // TODO four\n",
	"sub/deeper/g.json": "{}\n",
}

func testGlob(t *testing.T, newEnv Factory) {
	ctx := context.Background()
	env, root := open(t, newEnv, searchTree)
	tests := []struct {
		pattern, dir string
		want         []string
	}{
		{"*.go", "", []string{"a.go"}},
		{"**/*.go", "", []string{"a/b.go", "a/c/d.go", "a.go", "sub/deeper/f.go"}},
		{"*.{go,md}", "", []string{"README.md", "a.go", "a.md"}},
		{"**/*.{py,json}", "", []string{"sub/deeper/g.json", "sub/e.py"}},
		{"*", "", []string{"README.md", "a", "a.go", "a.md", "bin.dat", "notes.txt", "sub"}},
		{"a/*", "", []string{"a/b.go", "a/c"}},
		{"**", "a", []string{"a/b.go", "a/c", "a/c/d.go"}},
		{"*.go", "a", []string{"a/b.go"}},
		{"./*.go", root + "/a", []string{"a/b.go"}},
		{root + "/a/*.go", "a", []string{"a/b.go"}},
		{root + "/sub/*.py", "", []string{"sub/e.py"}},
		{"*.rs", "", nil},
		{"*", "a.go", nil},
	}
	for _, tt := range tests {
		got, err := env.Glob(ctx, tt.pattern, tt.dir)
		if err != nil {
			t.Errorf("Glob(%q, %q): %v", tt.pattern, tt.dir, err)
			continue
		}
		if len(got) != 0 || len(tt.want) != 0 {
			if !slices.Equal(got, tt.want) {
				t.Errorf("Glob(%q, %q) = %q, want %q", tt.pattern, tt.dir, got, tt.want)
			}
		}
	}
	_, err := env.Glob(ctx, "*.go", "missing")
	wantErr(t, "Glob(dir missing)", err, fs.ErrNotExist)
	_, err = env.Glob(ctx, "[", "")
	wantErr(t, "Glob([)", err, fs.ErrInvalid)
}

func testGrep(t *testing.T, newEnv Factory) {
	ctx := context.Background()
	env, root := open(t, newEnv, searchTree)
	m := func(path string, line int, text string) sandbox.GrepMatch {
		return sandbox.GrepMatch{Path: path, Line: line, Text: text}
	}
	tests := []struct {
		name string
		req  sandbox.GrepRequest
		want []sandbox.GrepMatch
	}{
		{"all in walk order", sandbox.GrepRequest{Pattern: "TODO"}, []sandbox.GrepMatch{
			m("README.md", 1, "TODO readme"), m("a/b.go", 1, "// TODO two"), m("a.go", 2, "// TODO one"),
			m("notes.txt", 4, "TODO last"), m("sub/deeper/f.go", 1, "func f() {} // TODO four"), m("sub/e.py", 1, "# TODO three"),
		}},
		{"include name", sandbox.GrepRequest{Pattern: "TODO", Include: "*.go"}, []sandbox.GrepMatch{
			m("a/b.go", 1, "// TODO two"), m("a.go", 2, "// TODO one"), m("sub/deeper/f.go", 1, "func f() {} // TODO four"),
		}},
		{"include braces", sandbox.GrepRequest{Pattern: "TODO", Include: "*.{py,md}"}, []sandbox.GrepMatch{
			m("README.md", 1, "TODO readme"), m("sub/e.py", 1, "# TODO three"),
		}},
		{"include path", sandbox.GrepRequest{Pattern: "TODO", Include: "sub/**/*.go"}, []sandbox.GrepMatch{
			m("sub/deeper/f.go", 1, "func f() {} // TODO four"),
		}},
		{"include relative to path", sandbox.GrepRequest{Pattern: "TODO", Path: "sub", Include: "deeper/*.go"}, []sandbox.GrepMatch{
			m("sub/deeper/f.go", 1, "func f() {} // TODO four"),
		}},
		{"path dir", sandbox.GrepRequest{Pattern: "TODO", Path: root + "/a"}, []sandbox.GrepMatch{m("a/b.go", 1, "// TODO two")}},
		{"path file", sandbox.GrepRequest{Pattern: "package", Path: "a/c/d.go"}, []sandbox.GrepMatch{m("a/c/d.go", 1, "package c")}},
		{"max matches", sandbox.GrepRequest{Pattern: "TODO", MaxMatches: 2}, []sandbox.GrepMatch{
			m("README.md", 1, "TODO readme"), m("a/b.go", 1, "// TODO two"),
		}},
		{"empty lines", sandbox.GrepRequest{Pattern: "^$", Path: "notes.txt"}, []sandbox.GrepMatch{m("notes.txt", 2, "")}},
		{"none", sandbox.GrepRequest{Pattern: "absent"}, nil},
	}
	for _, tt := range tests {
		got, err := env.Grep(ctx, tt.req)
		if err != nil {
			t.Errorf("%s: Grep(%+v): %v", tt.name, tt.req, err)
			continue
		}
		if len(got) != 0 || len(tt.want) != 0 {
			if !slices.Equal(got, tt.want) {
				t.Errorf("%s: Grep(%+v) =\n%+v\nwant\n%+v", tt.name, tt.req, got, tt.want)
			}
		}
	}
	_, err := env.Grep(ctx, sandbox.GrepRequest{Pattern: "x", Path: "missing"})
	wantErr(t, "Grep(path missing)", err, fs.ErrNotExist)
	_, err = env.Grep(ctx, sandbox.GrepRequest{Pattern: "("})
	wantErr(t, "Grep(bad pattern)", err, fs.ErrInvalid)
	_, err = env.Grep(ctx, sandbox.GrepRequest{Pattern: "x", Include: "[x"})
	wantErr(t, "Grep(bad include)", err, fs.ErrInvalid)
}
