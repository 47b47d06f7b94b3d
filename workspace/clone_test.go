package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/task"
)

func TestOpenLocal(t *testing.T) {
	fx := newFixture(t)
	notRepo := t.TempDir()
	missing := filepath.Join(t.TempDir(), "missing")
	tests := []struct {
		name       string
		repo       task.Repo
		wantCommit string
		wantHead   string // symbolic HEAD ("" for detached)
		wantFile   string // a file that must exist
		wantErr    error
		wantMsg    string
	}{
		{name: "path default branch", repo: task.Repo{URL: fx.dir}, wantCommit: fx.second, wantHead: "refs/heads/main"},
		{name: "file url", repo: task.Repo{URL: "file://" + fx.dir}, wantCommit: fx.second, wantHead: "refs/heads/main"},
		{name: "dot git dir", repo: task.Repo{URL: filepath.Join(fx.dir, ".git")}, wantCommit: fx.second, wantHead: "refs/heads/main"},
		{name: "branch", repo: task.Repo{URL: fx.dir, Ref: "feature"}, wantCommit: fx.feature, wantHead: "refs/heads/feature", wantFile: "feature.txt"},
		{name: "full ref", repo: task.Repo{URL: fx.dir, Ref: "refs/heads/feature"}, wantCommit: fx.feature, wantHead: "refs/heads/feature"},
		{name: "tag", repo: task.Repo{URL: fx.dir, Ref: "v1"}, wantCommit: fx.first},
		{name: "annotated tag", repo: task.Repo{URL: fx.dir, Ref: "v1-ann"}, wantCommit: fx.first},
		{name: "commit", repo: task.Repo{URL: fx.dir, Commit: fx.first}, wantCommit: fx.first},
		{name: "short commit", repo: task.Repo{URL: fx.dir, Commit: fx.feature[:9]}, wantCommit: fx.feature, wantFile: "feature.txt"},
		{name: "branch at commit", repo: task.Repo{URL: fx.dir, Ref: "main", Commit: fx.first}, wantCommit: fx.first, wantHead: "refs/heads/main"},
		{name: "bad ref", repo: task.Repo{URL: fx.dir, Ref: "nope"}, wantErr: ErrRefNotFound},
		{name: "bad commit", repo: task.Repo{URL: fx.dir, Commit: strings.Repeat("ab", 20)}, wantErr: ErrCommitNotFound},
		{name: "not hex commit", repo: task.Repo{URL: fx.dir, Commit: "main"}, wantErr: ErrCommitNotFound},
		{name: "not a repo", repo: task.Repo{URL: notRepo}, wantErr: ErrNotRepository, wantMsg: "not a git repository: " + notRepo},
		{name: "missing path", repo: task.Repo{URL: missing}, wantErr: ErrNotRepository, wantMsg: "not a git repository: " + missing},
		{name: "ssh url", repo: task.Repo{URL: "git@github.com:o/r.git"}, wantErr: ErrUnsupportedURL},
		{name: "http url", repo: task.Repo{URL: "ftp://example.com/r.git"}, wantErr: ErrUnsupportedURL},
	}
	for _, mirror := range []bool{false, true} {
		m, _ := testManager(t, mirror, nil)
		for _, tt := range tests {
			t.Run(tt.name+map[bool]string{false: "/direct", true: "/mirror"}[mirror], func(t *testing.T) {
				w, err := m.Open(ctxT(t), "task-1", tt.repo, nil)
				if tt.wantErr != nil {
					var ce *CloneError
					if !errors.As(err, &ce) || !errors.Is(err, tt.wantErr) {
						t.Fatalf("err = %v, want a *CloneError wrapping %v", err, tt.wantErr)
					}
					if ce.Retriable {
						t.Errorf("%v is marked retriable", err)
					}
					if tt.wantMsg != "" && !strings.Contains(err.Error(), tt.wantMsg) {
						t.Errorf("err = %q, want it to say %q", err, tt.wantMsg)
					}
					if des, _ := os.ReadDir(m.cfg.Root); len(des) != 0 {
						t.Errorf("failed Open left %d entries in Root", len(des))
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				defer w.Close()
				if w.BaseCommit() != tt.wantCommit {
					t.Errorf("BaseCommit = %s, want %s", w.BaseCommit(), tt.wantCommit)
				}
				// Real git inside the workspace agrees and sees a clean tree.
				if got := runGit(t, w.Dir(), "rev-parse", "HEAD"); got != tt.wantCommit {
					t.Errorf("git HEAD = %s, want %s", got, tt.wantCommit)
				}
				head := runGitOK(t, w.Dir(), "symbolic-ref", "-q", "HEAD")
				if head != tt.wantHead {
					t.Errorf("symbolic HEAD = %q, want %q", head, tt.wantHead)
				}
				if st := runGit(t, w.Dir(), "status", "--porcelain", "--ignored"); st != "" {
					t.Errorf("git status not clean:\n%s", st)
				}
				runGit(t, w.Dir(), "fsck", "--no-progress")
				if tt.wantFile != "" {
					if _, err := os.Stat(filepath.Join(w.Dir(), tt.wantFile)); err != nil {
						t.Error(err)
					}
				}
				if got, want := treeListing(t, w.Dir()), gitTreeListing(t, fx.dir, tt.wantCommit); got != want {
					t.Errorf("working tree:\n%s\nwant (git ls-tree):\n%s", got, want)
				}
			})
		}
	}
}

// runGitOK runs git and returns its output, or "" when it fails.
func runGitOK(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := gitCmd(dir, args...).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func TestGitlinksAndTrackedIgnoredFiles(t *testing.T) {
	fx := newFixture(t)
	// A submodule entry (gitlink) and a file tracked under an ignored
	// directory.
	writeFile(t, fx.dir, "build/tracked.txt", "tracked despite build/ being ignored\n", 0o644)
	runGit(t, fx.dir, "add", "-f", "build/tracked.txt")
	runGit(t, fx.dir, "update-index", "--add", "--cacheinfo", "160000,"+fx.first+",vendor/sub")
	runGit(t, fx.dir, "commit", "-q", "-m", "gitlink")
	for _, mirror := range []bool{false, true} {
		m, _ := testManager(t, mirror, nil)
		w, err := m.Open(ctxT(t), "t", task.Repo{URL: fx.dir}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(filepath.Join(w.Dir(), "vendor/sub")); err != nil || !fi.IsDir() {
			t.Errorf("submodule directory: %v", err)
		}
		if st := runGit(t, w.Dir(), "status", "--porcelain"); st != "" {
			t.Errorf("git status:\n%s", st)
		}
		writeFile(t, w.Dir(), "build/tracked.txt", "edited\n", 0o644)
		writeFile(t, w.Dir(), "build/untracked.o", "ignored\n", 0o644)
		writeFile(t, w.Dir(), "vendor/sub/inside.txt", "submodule content is not ours\n", 0o644)
		changed, err := w.Changed(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(changed, ","); got != "build/tracked.txt" {
			t.Errorf("Changed = %s, want build/tracked.txt only", got)
		}
		if err := w.Rollback(ctxT(t), w.BaseCheckpoint()); err != nil {
			t.Fatal(err)
		}
		if data, _ := os.ReadFile(filepath.Join(w.Dir(), "build/tracked.txt")); !strings.Contains(string(data), "tracked despite") {
			t.Errorf("tracked file under an ignored directory not restored: %q", data)
		}
		if _, err := os.Stat(filepath.Join(w.Dir(), "build/untracked.o")); err != nil {
			t.Errorf("ignored file removed: %v", err)
		}
		w.Close()
	}
}

func TestOpenCancelled(t *testing.T) {
	fx := newFixture(t)
	m, _ := testManager(t, true, nil)
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	_, err := m.Open(ctx, "t", task.Repo{URL: fx.dir}, nil)
	var ce *CloneError
	if !errors.As(err, &ce) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want a CloneError wrapping context.Canceled", err)
	}
	if des, _ := os.ReadDir(m.cfg.Root); len(des) != 0 {
		t.Errorf("cancelled Open left %d entries", len(des))
	}
}
