package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/environment"
)

// TestEnvCommands drives `wrench env build`, `ls` and `prune` through the
// binary on the real engine: a build is a miss, then a hit; a changed
// manifest is a new snapshot; ls lists both, most recently used first;
// prune under a size budget removes the least recently used; bad input
// exits 2 naming the problem.
func TestEnvCommands(t *testing.T) {
	requireImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	// A Python package: no build cache to warm, so a snapshot stays small.
	repo := gitRepo(t, "py-textstats")
	manifest := filepath.Join(repo, "requirements.txt")
	if err := os.WriteFile(manifest, []byte("# no dependencies\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "add", "requirements.txt")
	git(t, repo, "commit", "-qm", "a manifest")
	data := t.TempDir()
	deployment := testDeployment("env")
	common := []string{"--data-dir", data, "--deployment", deployment}
	env := func(args ...string) (string, string, int) {
		t.Helper()
		return runWrench(t, ctx, nil, append(append([]string{"env"}, args...), common...)...)
	}
	t.Cleanup(func() {
		runWrench(t, context.Background(), nil, append([]string{"env", "prune", "--older-than", "1ns"}, common...)...)
	})
	build := func(want string) string {
		t.Helper()
		out, errOut, code := env("build", "--repo", repo)
		if code != 0 || !strings.HasPrefix(out, want+" ") {
			t.Fatalf("env build: exit %d, stdout %q, want %q first\n%s", code, out, want, errOut)
		}
		return strings.Fields(out)[1]
	}
	ls := func() []environment.Snapshot {
		t.Helper()
		out, errOut, code := env("ls", "--json")
		var list []environment.Snapshot
		if code != 0 || json.Unmarshal([]byte(out), &list) != nil {
			t.Fatalf("env ls --json: exit %d %q\n%s", code, out, errOut)
		}
		return list
	}

	first := build("miss")
	if again := build("hit"); again != first {
		t.Errorf("second build hit %s, want %s", again, first)
	}
	// A manifest change is another environment.
	if err := os.WriteFile(manifest, []byte("# still none\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "commit", "-qam", "change the manifest")
	second := build("miss")
	if second == first {
		t.Fatalf("a changed requirements.txt kept key %s", first)
	}
	list := ls()
	if len(list) != 2 {
		t.Fatalf("env ls: %d snapshots, want 2: %+v", len(list), list)
	}
	text, _, _ := env("ls")
	if i, j := strings.Index(text, second), strings.Index(text, first); i < 0 || j < 0 || i > j {
		t.Errorf("env ls does not list %s before %s (most recently used first):\n%s", second, first, text)
	}

	// A budget the newer snapshot alone fits removes the older one.
	var keep int64
	for _, sn := range list {
		if strings.HasPrefix(sn.Key, second) {
			keep = sn.OwnSize
		}
	}
	out, errOut, code := env("prune", "--max-size", fmt.Sprint(keep))
	if code != 0 || !strings.Contains(out, "removed "+first) || strings.Contains(out, second) {
		t.Errorf("env prune --max-size %d: exit %d, %q\n%s", keep, code, out, errOut)
	}
	if list := ls(); len(list) != 1 || !strings.HasPrefix(list[0].Key, second) {
		t.Errorf("after prune: %+v", list)
	}

	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"prune"}, "--older-than, --max-size or both"},
		{[]string{"prune", "--max-size", "lots"}, "not a size"},
		{[]string{"build"}, "--repo is required"},
		{[]string{"bogus"}, "unknown subcommand"},
	} {
		if _, errOut, code := env(bad.args...); code != 2 || !strings.Contains(errOut, bad.want) {
			t.Errorf("env %v: exit %d, stderr %q; want 2 and %q", bad.args, code, errOut, bad.want)
		}
	}
}
