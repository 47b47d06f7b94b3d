package workspace

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
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
	write("src/lib/util.go", utilGo, 0o644)
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

// gitCmd is a git command with a neutral environment.
func gitCmd(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	return cmd
}

// treeListing describes the files under dir (not .git, not empty
// directories) like `git ls-tree -r`: mode, blob hash, path; sorted.
func treeListing(t testing.TB, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		var mode string
		var data []byte
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			mode = "120000"
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			data = []byte(target)
		case fi.Mode()&0o100 != 0:
			mode = "100755"
		default:
			mode = "100644"
		}
		if data == nil {
			if data, err = os.ReadFile(p); err != nil {
				return err
			}
		}
		lines = append(lines, fmt.Sprintf("%s %s\t%s", mode, blobHash(data), filepath.ToSlash(rel)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// gitTreeListing is treeListing's format from `git ls-tree -r` of rev.
func gitTreeListing(t testing.TB, repo, rev string) string {
	t.Helper()
	out := runGit(t, repo, "ls-tree", "-r", "--full-tree", rev)
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if l == "" {
			continue
		}
		// "<mode> blob <hash>\t<path>"
		f := strings.SplitN(l, " ", 3)
		lines = append(lines, f[0]+" "+f[2])
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// utilGo is the fixture's src/lib/util.go.
const utilGo = `package lib

// Add adds.
func Add(a, b int) int { return a - b }

// Sub subtracts.
func Sub(a, b int) int { return a - b }

// Mul multiplies.
func Mul(a, b int) int { return a * b }

// Div divides.
func Div(a, b int) int { return a / b }
`
