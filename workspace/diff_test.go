package workspace

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/task"
)

// applyPatch clones repo at rev with the git CLI, checks and applies patch
// with `git apply`, and returns the clone's directory.
func applyPatch(t *testing.T, repo, rev, patch string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "apply")
	runGit(t, "", "clone", "-q", repo, dst)
	runGit(t, dst, "checkout", "-q", rev)
	pf := filepath.Join(t.TempDir(), "p.diff")
	must(t, os.WriteFile(pf, []byte(patch), 0o644))
	for _, args := range [][]string{{"apply", "--check", pf}, {"apply", pf}} {
		cmd := gitCmd(dst, args...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s\npatch:\n%s", strings.Join(args, " "), err, out, patch)
		}
	}
	return dst
}

func TestDiffAppliesWithGit(t *testing.T) {
	fx := newFixture(t)
	m, _ := testManager(t, true, nil)
	for _, mu := range mutations {
		t.Run(mu.name, func(t *testing.T) {
			w, err := m.Open(ctxT(t), "t", task.Repo{URL: fx.dir}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			mu.do(t, w.Dir())
			patch, err := w.Diff(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			if patch == "" {
				// Only what git cannot express (empty directories) changed.
				if got, want := gitTreeListing(t, fx.dir, w.BaseCommit()), treeListing(t, w.Dir()); got != want {
					t.Fatalf("empty diff, but the files changed:\n%s\nwant:\n%s", got, want)
				}
				return
			}
			dst := applyPatch(t, fx.dir, w.BaseCommit(), patch)
			if got, want := treeListing(t, dst), treeListing(t, w.Dir()); got != want {
				t.Errorf("patched clone:\n%s\nworkspace:\n%s\npatch:\n%s", got, want, patch)
			}
			// The reverse applies too (binary patches carry both sides).
			cmd := gitCmd(dst, "apply", "-R", "--check", "-")
			cmd.Stdin = strings.NewReader(patch)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("git apply -R --check: %v\n%s", err, out)
			}
		})
	}
}

func TestDiffFormat(t *testing.T) {
	fx := newFixture(t)
	m, _ := testManager(t, false, nil)
	tests := []struct {
		name string
		do   func(t *testing.T, d string)
		want []string // lines the patch must contain
	}{
		{"rename", mutations[19].do, []string{"similarity index 100%", "rename from src/lib/util.go", "rename to src/lib/helpers.go"}},
		{"rename and edit", mutations[20].do, []string{"rename from src/lib/util.go", "rename to pkg/util.go", "-func Add(a, b int) int { return a - b }", "+func Add(a, b int) int { return a + b }"}},
		{"mode", mutations[5].do, []string{"old mode 100644", "new mode 100755"}},
		{"binary", mutations[8].do, []string{"GIT binary patch", "literal 13"}},
		{"no newline", mutations[1].do, []string{`\ No newline at end of file`}},
		{"quoted", mutations[21].do, []string{`"b/quote\"and\\back.txt"`, `"b/tab\tname"`, `"b/\303\274n\303\257code/\306\222ile.txt"`, "b/with space.txt"}},
		{"nothing", func(*testing.T, string) {}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := m.Open(ctxT(t), "t", task.Repo{URL: fx.dir}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			tt.do(t, w.Dir())
			patch, err := w.Diff(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == nil && patch != "" {
				t.Fatalf("want an empty diff, got:\n%s", patch)
			}
			for _, line := range tt.want {
				if !strings.Contains(patch, line) {
					t.Errorf("patch lacks %q:\n%s", line, patch)
				}
			}
			if tt.want != nil {
				// Same file list as git's own diff of the same change.
				runGit(t, w.Dir(), "add", "-A")
				var want []string
				for _, l := range strings.Split(runGit(t, w.Dir(), "diff", "--cached", "--name-status", "-M", "HEAD"), "\n") {
					want = append(want, l[:1])
				}
				if got := patchStatus(patch); strings.Join(got, " ") != strings.Join(want, " ") {
					t.Errorf("file statuses %v, git says %v", got, want)
				}
			}
		})
	}
}

func TestDiffIncludesShellChanges(t *testing.T) {
	fx := newFixture(t)
	m, _ := testManager(t, false, nil)
	w, err := m.Open(ctxT(t), "t", task.Repo{URL: fx.dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	sh := exec.Command("sh", "-c", "sed -i 's/a - b/a + b/' src/lib/util.go && mkdir -p gen && echo generated > gen/out.txt && rm data/blob.bin")
	sh.Dir = w.Dir()
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	changed, err := w.Changed(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(changed, ","); got != "data/blob.bin,gen/out.txt,src/lib/util.go" {
		t.Errorf("Changed = %s", got)
	}
	patch, err := w.Diff(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	dst := applyPatch(t, fx.dir, w.BaseCommit(), patch)
	if got, want := treeListing(t, dst), treeListing(t, w.Dir()); got != want {
		t.Errorf("patched clone:\n%s\nworkspace:\n%s", got, want)
	}
}

// patchStatus summarizes each file of a patch as git's name-status letter.
func patchStatus(patch string) []string {
	var out []string
	for _, sec := range strings.Split(patch, "diff --git ")[1:] {
		switch {
		case strings.Contains(sec, "\nrename from "):
			out = append(out, "R")
		case strings.Contains(sec, "\nnew file mode "):
			out = append(out, "A")
		case strings.Contains(sec, "\ndeleted file mode "):
			out = append(out, "D")
		default:
			out = append(out, "M")
		}
	}
	return out
}
