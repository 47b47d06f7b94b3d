package memenv_test

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/agent/editformat"
	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/sandbox"
)

func TestFiles(t *testing.T) {
	ctx := context.Background()
	e := memenv.New(map[string]string{"a.go": "package a\n", "pkg/b.go": "package pkg\n", ".git/HEAD": "ref\n"})
	if b, err := e.ReadFile(ctx, "/workspace/a.go"); err != nil || string(b) != "package a\n" {
		t.Errorf("read absolute: %q %v", b, err)
	}
	for _, p := range []string{"../x", "/etc/passwd"} {
		if _, err := e.ReadFile(ctx, p); !errors.Is(err, fs.ErrPermission) {
			t.Errorf("read %s: %v", p, err)
		}
	}
	if _, err := e.ReadFile(ctx, "nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	if _, err := e.ReadFile(ctx, "pkg"); !errors.Is(err, editformat.ErrIsDir) {
		t.Errorf("dir: %v", err)
	}
	if err := e.WriteFile(ctx, "new/deep/c.go", []byte("c"), 0); err != nil {
		t.Fatal(err)
	}
	if fi, err := e.Stat(ctx, "new/deep"); err != nil || !fi.IsDir {
		t.Errorf("implied dir: %+v %v", fi, err)
	}
	if err := e.WriteFile(ctx, "a.go/x", []byte("c"), 0); err == nil {
		t.Errorf("wrote under a file")
	}
	ls, err := e.ListDir(ctx, ".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, fi := range ls {
		names = append(names, fi.Path)
	}
	if !slices.Equal(names, []string{".git", "a.go", "new", "pkg"}) {
		t.Errorf("ls = %q", names)
	}
	if err := e.Remove(ctx, "a.go"); err != nil {
		t.Fatal(err)
	}
	if err := e.Remove(ctx, "a.go"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("remove twice: %v", err)
	}
	g, _ := e.Glob(ctx, "**/*.go", ".")
	if !slices.Equal(g, []string{"new/deep/c.go", "pkg/b.go"}) {
		t.Errorf("glob = %q", g)
	}
	m, _ := e.Grep(ctx, sandbox.GrepRequest{Pattern: "^package", Include: "*.go"})
	if len(m) != 1 || m[0].Path != "pkg/b.go" || m[0].Line != 1 {
		t.Errorf("grep = %+v", m)
	}
}

func TestExec(t *testing.T) {
	ctx := context.Background()
	e := memenv.New(map[string]string{"a.txt": "A\n"})
	e.Handle("go test", func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		return sandbox.ExecResult{ExitCode: 1, Output: []byte("FAIL\n")}, nil
	})
	for _, tc := range []struct {
		cmd  string
		code int
		out  string
	}{
		{"echo hi there", 0, "hi there\n"},
		{"cat a.txt", 0, "A\n"},
		{"cat nope", 1, "No such file"},
		{"false", 1, ""},
		{"exit 3", 3, ""},
		{"go test ./...", 1, "FAIL"},
		{"gotest", 127, "command not found"},
	} {
		res, err := e.Exec(ctx, sandbox.ExecRequest{Command: tc.cmd})
		if err != nil || res.ExitCode != tc.code || !strings.Contains(string(res.Output), tc.out) {
			t.Errorf("%s: %d %q %v", tc.cmd, res.ExitCode, res.Output, err)
		}
	}
	res, err := e.Exec(ctx, sandbox.ExecRequest{Command: "sleep 60", Timeout: time.Millisecond})
	if err != nil || !res.TimedOut {
		t.Errorf("sleep timeout: %+v %v", res, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.Exec(cctx, sandbox.ExecRequest{Command: "sleep 60"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if got := e.Commands(); len(got) != 8 { // the cancelled one never ran
		t.Errorf("commands = %q", got)
	}
}

func TestCheckpoints(t *testing.T) {
	ctx := context.Background()
	e := memenv.New(map[string]string{"a.txt": "one\n"})
	id, err := e.Checkpoint(ctx, "base")
	if err != nil {
		t.Fatal(err)
	}
	e.SetFile("a.txt", "two\n")
	e.SetFile("b.txt", "new\n")
	d, _ := e.Diff(ctx)
	if !strings.Contains(d, "-one\n+two") || !strings.Contains(d, "+++ b/b.txt") {
		t.Errorf("diff = %q", d)
	}
	if err := e.Rollback(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := e.Files(); len(got) != 1 || got["a.txt"] != "one\n" {
		t.Errorf("after rollback: %q", got)
	}
	if err := e.Rollback(ctx, "cp-99"); err == nil {
		t.Errorf("unknown checkpoint accepted")
	}
}
