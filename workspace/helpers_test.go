package workspace

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// requireGit skips a test that needs the git CLI when it is missing,
// except under CI=true, where it fails.
func requireGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git CLI not found (required under CI=true)")
		}
		t.Skip("git CLI not found; these tests check results with real git")
	}
}

// testManager returns a Manager rooted in a temporary directory, with a
// mirror directory when mirror is true, and a buffer holding its log.
func testManager(t testing.TB, mirror bool, mod func(*Config)) (*Manager, *bytes.Buffer) {
	t.Helper()
	base := t.TempDir()
	var logBuf bytes.Buffer
	cfg := Config{
		Root:       filepath.Join(base, "workspaces"),
		Deployment: "test",
		Logger:     slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mirror {
		cfg.MirrorDir = filepath.Join(base, "mirrors")
	}
	if mod != nil {
		mod(&cfg)
	}
	m, err := NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m, &logBuf
}

// fixture is a small repository made with the git CLI: branch main with
// two commits (tag v1 on the first, annotated tag v1-ann too), and branch
// feature with one more commit.
type fixture struct {
	dir                    string
	first, second, feature string
}

func newFixture(t testing.TB) fixture {
	t.Helper()
	requireGit(t)
	dir := filepath.Join(t.TempDir(), "src")
	runGit(t, "", "init", "-q", "-b", "main", dir)
	write := func(rel, content string, mode os.FileMode) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "hello\n", 0o644)
	write("src/main.go", "package main\n\nfunc main() {}\n", 0o644)
	write("src/lib/util.go", "package lib\n\n// Add adds.\nfunc Add(a, b int) int { return a - b }\n", 0o644)
	write("scripts/run.sh", "#!/bin/sh\necho run\n", 0o755)
	write("data/blob.bin", "\x00\x01\x02binary\x00", 0o644)
	write(".gitignore", "*.log\nbuild/\n", 0o644)
	if err := os.Symlink("README.md", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	runGit(t, dir, "add", "-A")
	runGit(t, dir, "commit", "-q", "-m", "first")
	first := runGit(t, dir, "rev-parse", "HEAD")
	runGit(t, dir, "tag", "v1")
	runGit(t, dir, "tag", "-a", "-m", "annotated", "v1-ann")
	write("README.md", "hello\nworld\n", 0o644)
	runGit(t, dir, "commit", "-q", "-am", "second")
	second := runGit(t, dir, "rev-parse", "HEAD")
	runGit(t, dir, "checkout", "-q", "-b", "feature")
	write("feature.txt", "feature\n", 0o644)
	runGit(t, dir, "add", "-A")
	runGit(t, dir, "commit", "-q", "-m", "feature")
	feature := runGit(t, dir, "rev-parse", "HEAD")
	runGit(t, dir, "checkout", "-q", "main")
	return fixture{dir: dir, first: first, second: second, feature: feature}
}

func ctxT(t testing.TB) context.Context { return t.Context() }
