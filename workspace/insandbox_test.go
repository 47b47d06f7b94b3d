package workspace

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/task"
)

// extract unpacks an Export stream under root, as the sandbox backend does
// at "/".
func extract(t *testing.T, r io.Reader, root string) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, p); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
}

// sandboxed clones fx at commit into a host workspace, exports it and
// reopens the export as the helper inside a sandbox would.
func sandboxed(t *testing.T, m *Manager, fx fixture, commit string) (*Workspace, string) {
	t.Helper()
	host, err := m.Open(ctxT(t), "t-export", task.Repo{URL: fx.dir, Commit: commit}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := host.Export(ctxT(t), &buf, Owner{UID: os.Getuid(), GID: os.Getgid()}); err != nil {
		t.Fatal(err)
	}
	host.Close()
	root := t.TempDir()
	extract(t, &buf, root)
	w, err := Reopen(ctxT(t), ReopenConfig{Tree: filepath.Join(root, "workspace"), State: filepath.Join(root, ".wrench/state")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w, filepath.Join(root, "workspace")
}

func readFile(t *testing.T, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestExportReopenCheckpoints(t *testing.T) {
	fx := newFixture(t)
	m, _ := testManager(t, true, nil)
	w, tree := sandboxed(t, m, fx, fx.second)
	if got := w.BaseCommit(); got != fx.second {
		t.Fatalf("base %s, want %s", got, fx.second)
	}
	if out := strings.TrimSpace(runGit(t, tree, "status", "--porcelain")); out != "" {
		t.Fatalf("git status in the exported tree is not clean:\n%s", out)
	}
	if d, err := w.Diff(ctxT(t)); err != nil || d != "" {
		t.Fatalf("fresh diff %q, %v", d, err)
	}
	writeFile(t, tree, "README.md", "changed\n", 0o644)
	cp, err := w.Checkpoint(ctxT(t), "one")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, tree, "README.md", "broken\n", 0o644)
	if err := w.Rollback(ctxT(t), cp); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, tree, "README.md"); got != "changed\n" {
		t.Errorf("after rollback README.md = %q", got)
	}
	if err := w.Rollback(ctxT(t), w.BaseCheckpoint()); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, tree, "README.md"); got != "hello\nworld\n" {
		t.Errorf("after rollback to base README.md = %q", got)
	}
}

func TestSealKeepsSetupOutOfPatches(t *testing.T) {
	fx := newFixture(t)
	m, _ := testManager(t, true, nil)
	w, tree := sandboxed(t, m, fx, fx.second)
	// What a setup might do: a virtualenv, a generated file beside
	// tracked ones, an ignored build dir, and a tidy that edits a tracked
	// file.
	writeFile(t, tree, ".venv/bin/python", "#!/bin/sh\n", 0o644)
	writeFile(t, tree, "src/lib/generated.go", "package lib\n", 0o644)
	writeFile(t, tree, "build/out.o", "obj", 0o644)
	writeFile(t, tree, "README.md", "tidied\n", 0o644)
	rep, err := w.Seal(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rep.Restored, ",") != "README.md" || strings.Join(rep.Ignored, ",") != ".venv,src/lib/generated.go" {
		t.Errorf("seal report %+v", rep)
	}
	if got := readFile(t, tree, "README.md"); got != "hello\nworld\n" {
		t.Errorf("tracked file not restored: %q", got)
	}
	if d, _ := w.Diff(ctxT(t)); d != "" {
		t.Errorf("diff after seal includes the environment:\n%s", d)
	}
	// The record survives a reopen (the snapshot image).
	w.Close()
	w2, err := Reopen(ctxT(t), ReopenConfig{Tree: tree, State: filepath.Join(filepath.Dir(tree), ".wrench/state")})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	writeFile(t, tree, ".venv/lib/x.py", "x = 1\n", 0o644)
	writeFile(t, tree, "src/main.go", "package main\n\nfunc main() { println() }\n", 0o644)
	d, err := w2.Diff(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d, "src/main.go") || strings.Contains(d, ".venv") || strings.Contains(d, "generated.go") {
		t.Errorf("diff after reopen:\n%s", d)
	}
}

func TestSwitchWithPack(t *testing.T) {
	fx := newFixture(t)
	m, _ := testManager(t, true, nil)
	w, tree := sandboxed(t, m, fx, fx.first)
	writeFile(t, tree, ".venv/marker", "env\n", 0o644)
	if _, err := w.Seal(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	// A new commit appears upstream after the snapshot.
	writeFile(t, fx.dir, "src/new.go", "package main\n", 0o644)
	runGit(t, fx.dir, "add", "-A")
	runGit(t, fx.dir, "commit", "-q", "-m", "third")
	third := runGit(t, fx.dir, "rev-parse", "HEAD")

	c, err := m.Resolve(ctxT(t), task.Repo{URL: fx.dir, Ref: "main"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Hash() != third {
		t.Fatalf("resolved %s, want %s", c.Hash(), third)
	}
	var pack bytes.Buffer
	n, err := c.Pack(ctxT(t), &pack, []string{fx.first})
	if err != nil {
		t.Fatal(err)
	}
	// second (commit, tree, README blob) and third (commit, root and src
	// trees, new.go blob): a handful, not the whole history.
	if n == 0 || n > 10 {
		t.Errorf("pack holds %d objects", n)
	}
	if err := w.ReceivePack(ctxT(t), &pack); err != nil {
		t.Fatal(err)
	}
	if err := w.Switch(ctxT(t), c.Checkout()); err != nil {
		t.Fatal(err)
	}
	if got := runGit(t, tree, "rev-parse", "HEAD"); got != third {
		t.Errorf("HEAD %s, want %s", got, third)
	}
	if got := runGit(t, tree, "rev-parse", "--abbrev-ref", "HEAD"); got != "main" {
		t.Errorf("branch %q, want main", got)
	}
	if out := strings.TrimSpace(runGit(t, tree, "status", "--porcelain")); out != "" {
		t.Errorf("git status after switch:\n%s", out)
	}
	if got := readFile(t, tree, "README.md"); got != "hello\nworld\n" {
		t.Errorf("README.md %q", got)
	}
	if readFile(t, tree, ".venv/marker") != "env\n" {
		t.Error("switch touched the environment's paths")
	}
	if w.BaseCommit() != third {
		t.Errorf("base %s after switch", w.BaseCommit())
	}
	// A change after the switch diffs against the new base and applies to
	// a fresh clone of it.
	writeFile(t, tree, "src/new.go", "package main\n\nvar x = 1\n", 0o644)
	d, err := w.Diff(ctxT(t))
	if err != nil || !strings.Contains(d, "+var x = 1") {
		t.Fatalf("diff %q, %v", d, err)
	}
	check := filepath.Join(t.TempDir(), "check")
	runGit(t, "", "clone", "-q", fx.dir, check)
	cmd := gitCmd(check, "apply", "--check", "-")
	cmd.Stdin = strings.NewReader(d)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("git apply --check: %v\n%s", err, out)
	}
	if err := w.Rollback(ctxT(t), w.BaseCheckpoint()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(tree, "src/new.go")); err != nil {
		t.Errorf("rollback to the new base lost src/new.go: %v", err)
	}
}

func TestDiffLeavesOutLargeFiles(t *testing.T) {
	fx := newFixture(t)
	m, _ := testManager(t, true, nil)
	w, tree := sandboxed(t, m, fx, fx.second)
	w.maxFile = 1 << 10
	writeFile(t, tree, "big.txt", strings.Repeat("x", 4<<10), 0o644)
	writeFile(t, tree, "README.md", "small change\n", 0o644)
	d, err := w.Diff(ctxT(t))
	var partial *PartialDiff
	if !errors.As(err, &partial) || len(partial.TooLarge) != 1 || partial.TooLarge[0] != "big.txt" {
		t.Fatalf("err %v, want a PartialDiff naming big.txt", err)
	}
	if !strings.Contains(d, "+small change") || strings.Contains(d, "big.txt") {
		t.Errorf("patch:\n%s", d)
	}
}
