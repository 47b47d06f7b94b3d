package github

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/wrenchworks/wrench/github/githubtest"
	"github.com/wrenchworks/wrench/task"
	"github.com/wrenchworks/wrench/workspace"
)

func runGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull,
		"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.com", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.com")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return strings.TrimSpace(out.String())
}

func write(t *testing.T, dir, p, content string, mode os.FileMode) {
	t.Helper()
	full := filepath.Join(dir, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(full, mode); err != nil {
		t.Fatal(err)
	}
}

// binaryBlob is content git treats as binary.
var binaryBlob = string(bytes.Repeat([]byte{0, 1, 2, 3, 250, 251, 252, 10}, 300))

// TestApplyPatchMatchesGit makes each change in a workspace, takes the
// patch the worker would (workspace.Diff), applies it with applyPatch to
// the base commit, and compares the resulting tree with the tree git
// itself writes for the changed working tree: same hash, so same paths,
// contents and modes.
func TestApplyPatchMatchesGit(t *testing.T) {
	githubtest.RequireGit(t)
	base := func(t *testing.T, dir string) {
		write(t, dir, "calc.go", "package calc\n\nfunc Add(a, b int) int {\n\treturn a - b\n}\n", 0o644)
		write(t, dir, "README.md", "# calc\n\nline\nline\nline\nline\nline\nend\n", 0o644)
		write(t, dir, "run.sh", "#!/bin/sh\necho hi\n", 0o755)
		write(t, dir, "docs/guide.md", "guide\n", 0o644)
		write(t, dir, "data.bin", binaryBlob, 0o644)
		write(t, dir, "no-newline.txt", "last line", 0o644)
		write(t, dir, "big.txt", strings.Repeat("the same line of text again\n", 50), 0o644)
		if err := os.Symlink("calc.go", filepath.Join(dir, "link")); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name   string
		change func(t *testing.T, dir string)
	}{
		{"modify", func(t *testing.T, d string) {
			write(t, d, "calc.go", strings.Replace(readFile(t, d, "calc.go"), "a - b", "a + b", 1), 0o644)
		}},
		{"add nested", func(t *testing.T, d string) { write(t, d, "pkg/deep/new.go", "package deep\n", 0o644) }},
		{"delete last file of a directory", func(t *testing.T, d string) { rm(t, d, "docs/guide.md"); rm(t, d, "docs") }},
		{"rename", func(t *testing.T, d string) { mv(t, d, "big.txt", "renamed.txt") }},
		{"rename and modify", func(t *testing.T, d string) {
			mv(t, d, "big.txt", "moved/big2.txt")
			write(t, d, "moved/big2.txt", readFile(t, d, "moved/big2.txt")+"one more\n", 0o644)
		}},
		{"make executable", func(t *testing.T, d string) { chmod(t, d, "calc.go", 0o755) }},
		{"drop executable and edit", func(t *testing.T, d string) { write(t, d, "run.sh", "#!/bin/sh\necho bye\n", 0o644) }},
		{"new executable", func(t *testing.T, d string) { write(t, d, "bin/tool", "#!/bin/sh\n", 0o755) }},
		{"file becomes symlink", func(t *testing.T, d string) { rm(t, d, "README.md"); symlink(t, d, "calc.go", "README.md") }},
		{"symlink retargeted", func(t *testing.T, d string) { rm(t, d, "link"); symlink(t, d, "run.sh", "link") }},
		{"binary modified", func(t *testing.T, d string) { write(t, d, "data.bin", binaryBlob+"\x00\x07tail", 0o644) }},
		{"binary added", func(t *testing.T, d string) { write(t, d, "img/new.bin", "\x00\x01\x02new", 0o644) }},
		{"newline at end added", func(t *testing.T, d string) { write(t, d, "no-newline.txt", "last line\n", 0o644) }},
		{"crlf and unusual names", func(t *testing.T, d string) {
			write(t, d, "with space.txt", "a\r\nb\r\n", 0o644)
			write(t, d, "ünïcode/名前.txt", "x\n", 0o644)
			write(t, d, `quo"te.txt`, "q\n", 0o644)
		}},
		{"several hunks", func(t *testing.T, d string) {
			s := readFile(t, d, "README.md")
			write(t, d, "README.md", strings.Replace(strings.Replace(s, "# calc", "# Calc", 1), "end", "END", 1), 0o644)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := t.TempDir()
			runGit(t, src, "init", "-q", "-b", "main")
			base(t, src)
			runGit(t, src, "add", "-A")
			runGit(t, src, "commit", "-q", "-m", "base")

			m, err := workspace.NewManager(workspace.Config{Root: t.TempDir(), Deployment: "test"})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			ws, err := m.Open(ctx, "t-apply", task.Repo{URL: src}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			c.change(t, ws.Dir())
			patch, err := ws.Diff(ctx)
			if err != nil {
				t.Fatal(err)
			}
			runGit(t, ws.Dir(), "add", "-A")
			want := runGit(t, ws.Dir(), "write-tree")

			repo, err := git.PlainOpen(src)
			if err != nil {
				t.Fatal(err)
			}
			commit, err := repo.CommitObject(plumbing.NewHash(ws.BaseCommit()))
			if err != nil {
				t.Fatal(err)
			}
			got, err := applyPatch(repo, commit, patch)
			if err != nil {
				t.Fatalf("applyPatch: %v\npatch:\n%s", err, patch)
			}
			if got.String() != want {
				t.Errorf("tree %s, git wrote %s\npatch:\n%s\nours:\n%s\ngit's:\n%s", got, want, patch,
					runGit(t, src, "ls-tree", "-r", got.String()), runGit(t, ws.Dir(), "ls-tree", "-r", want))
			}
		})
	}
}

func TestApplyPatchRefuses(t *testing.T) {
	githubtest.RequireGit(t)
	src := t.TempDir()
	runGit(t, src, "init", "-q", "-b", "main")
	write(t, src, "a.txt", "one\ntwo\nthree\n", 0o644)
	runGit(t, src, "add", "-A")
	runGit(t, src, "commit", "-q", "-m", "base")
	repo, err := git.PlainOpen(src)
	if err != nil {
		t.Fatal(err)
	}
	head, _ := repo.Head()
	commit, _ := repo.CommitObject(head.Hash())

	modify := func(name, old, new string) string {
		return "diff --git a/" + name + " b/" + name + "\n--- a/" + name + "\n+++ b/" + name +
			"\n@@ -1,3 +1,3 @@\n one\n-" + old + "\n+" + new + "\n three\n"
	}
	create := func(name string) string {
		return "diff --git a/" + name + " b/" + name + "\nnew file mode 100644\n--- /dev/null\n+++ b/" + name +
			"\n@@ -0,0 +1 @@\n+x\n"
	}
	cases := []struct{ name, patch string }{
		{"context does not match", modify("a.txt", "TWO", "2")},
		{"file missing", modify("b.txt", "two", "2")},
		{"create existing file", create("a.txt")},
		{"parent directory", create("../outside.txt")},
		{"into .git", create(".git/hooks/post-checkout")},
		{"into .GIT of a subdirectory", create("sub/.GIT/config")},
		{"binary without data", "diff --git a/b.bin b/b.bin\nnew file mode 100644\nBinary files /dev/null and b/b.bin differ\n"},
		{"empty", ""},
		{"not a patch", "hello\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := applyPatch(repo, commit, c.patch); !errors.Is(err, ErrPatchDoesNotApply) {
				t.Fatalf("err = %v, want ErrPatchDoesNotApply", err)
			}
		})
	}
	// The exact patch applies.
	if _, err := applyPatch(repo, commit, modify("a.txt", "two", "2")); err != nil {
		t.Fatalf("good patch: %v", err)
	}
}

func readFile(t *testing.T, dir, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, p))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func rm(t *testing.T, dir, p string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, p)); err != nil {
		t.Fatal(err)
	}
}

func mv(t *testing.T, dir, from, to string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, to)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, from), filepath.Join(dir, to)); err != nil {
		t.Fatal(err)
	}
}

func chmod(t *testing.T, dir, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(filepath.Join(dir, p), mode); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, dir, target, p string) {
	t.Helper()
	if err := os.Symlink(target, filepath.Join(dir, p)); err != nil {
		t.Fatal(err)
	}
}
