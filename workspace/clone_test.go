package workspace

import (
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
