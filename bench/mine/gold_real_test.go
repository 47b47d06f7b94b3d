package mine

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent/editformat"
	"github.com/wrenchworks/wrench/bench/oracle"
	"github.com/wrenchworks/wrench/llm/scripted"
)

// realRepos is the directory of real repositories for tests:
// $WRENCH_REALREPOS, else shared/realrepos beside the checkout (../shared
// from the repository root, or one level further up from a worktree).
func realRepos(t *testing.T) string {
	if d := os.Getenv("WRENCH_REALREPOS"); d != "" {
		return d
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	for _, up := range []string{"..", filepath.Join("..", "..")} {
		d := filepath.Join(root, up, "shared", "realrepos")
		if _, err := os.Stat(d); err == nil {
			return d
		}
	}
	return filepath.Join(root, "..", "shared", "realrepos")
}

// TestGoldScriptsOnRealHistories replays the gold oracle of every
// candidate of the real histories the way the agent's tools would (the
// patch tool's own applier, bash for git apply) and checks the tree is
// exactly what `git apply` of the gold patch gives.
func TestGoldScriptsOnRealHistories(t *testing.T) {
	for _, bundle := range []string{"spf13-cast.bundle", "pallets-itsdangerous.bundle"} {
		t.Run(bundle, func(t *testing.T) {
			src := filepath.Join(realRepos(t), bundle)
			if _, err := os.Stat(src); err != nil {
				if os.Getenv("CI") == "true" {
					t.Fatalf("CI=true and %s is missing", src)
				}
				t.Skipf("%s is absent; skipping", src)
			}
			repo := filepath.Join(t.TempDir(), "repo")
			if out, err := exec.Command("git", "clone", "-q", src, repo).CombinedOutput(); err != nil {
				t.Fatalf("clone: %v\n%s", err, out)
			}
			ins, rep, err := Mine(context.Background(), Config{Repo: repo})
			if err != nil {
				t.Fatal(err)
			}
			viaBash := 0
			for _, in := range ins {
				got := checkout(t, repo, in.BaseCommit)
				script, err := oracle.Script(oracle.Gold, in.Patch, oracle.LocalBase(repo, in.BaseCommit))
				if err != nil {
					t.Errorf("%s: %v", in.InstanceID, err)
					continue
				}
				if playGold(t, got, script) {
					viaBash++
				}
				want := checkout(t, repo, in.BaseCommit)
				run(t, want, in.Patch, "git", "apply", "--whitespace=nowarn", "-")
				if a, b := tree(t, got), tree(t, want); a != b {
					t.Errorf("%s: the gold script gives tree %s, git apply %s", in.InstanceID, a, b)
				}
			}
			t.Logf("%s: %d candidates of %d commits; gold scripts through the patch tool alone: %d, with git apply too: %d",
				bundle, len(ins), rep.Commits, len(ins)-viaBash, viaBash)
		})
	}
}

func checkout(t *testing.T, repo, commit string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "wt")
	run(t, repo, "", "git", "worktree", "add", "-q", "--detach", dir, commit)
	return dir
}

func run(t *testing.T, dir, stdin string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// tree is the tree object of dir's working tree, everything added.
func tree(t *testing.T, dir string) string {
	t.Helper()
	run(t, dir, "", "git", "add", "-A")
	return run(t, dir, "", "git", "write-tree")
}

// playGold runs a gold script's tool calls in dir and says whether it
// used the bash tool.
func playGold(t *testing.T, dir string, yml []byte) (bash bool) {
	t.Helper()
	s, err := scripted.Parse(yml)
	if err != nil {
		t.Fatalf("script does not parse: %v", err)
	}
	read := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) }
	for _, st := range s.Steps {
		for _, c := range st.ToolCalls {
			var args map[string]string
			if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil {
				t.Fatal(err)
			}
			switch c.Name {
			case "patch":
				changes, err := editformat.ApplyPatch(args["patch_text"], read, editformat.PatchOptions{})
				if err != nil {
					t.Fatalf("patch tool refuses: %v", err)
				}
				for _, ch := range changes {
					p := filepath.Join(dir, ch.Path)
					if ch.After == nil {
						os.Remove(p)
						continue
					}
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						t.Fatal(err)
					}
					mode := os.FileMode(0o644)
					if fi, err := os.Stat(p); err == nil {
						mode = fi.Mode()
					}
					if err := os.WriteFile(p, ch.After, mode); err != nil {
						t.Fatal(err)
					}
					if ch.From != "" {
						os.Remove(filepath.Join(dir, ch.From))
					}
				}
			case "bash":
				bash = true
				run(t, dir, "", "bash", "-c", args["command"])
			}
		}
	}
	return bash
}
