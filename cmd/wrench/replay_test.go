package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReplay records a run's trajectory, replays it in a fresh sandbox on
// the same repository (every observation matches), then replays it on a
// repository where calc.go differs (a divergence is reported, exit 1).
func TestReplay(t *testing.T) {
	requireImage(t)
	repo := gitRepo(t, "go-calc")
	data := t.TempDir()
	deployment := testDeployment("replay")
	traj := filepath.Join(t.TempDir(), "traj.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	script := filepath.Join(moduleRoot(t), "examples", "go-calc", "fix.yaml")
	if _, stderr, code := runWrench(t, ctx, nil, "run", "--repo", repo, "--task", "Fix calc.", "--model", "scripted:"+script,
		"--trajectory", traj, "--data-dir", data, "--deployment", deployment, "--quiet"); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}

	out, stderr, code := runWrench(t, ctx, nil, "replay", traj, "--repo", repo, "--data-dir", data, "--deployment", deployment)
	if code != 0 || !strings.Contains(out, "0 diverged") {
		t.Fatalf("replay on the same repository: exit %d\n%s%s", code, out, stderr)
	}

	// The repository moves on: calc.go changes in a new commit. The
	// trajectory recorded its base commit, so replay still starts from the
	// tree the run saw and matches.
	if err := os.WriteFile(filepath.Join(repo, "calc.go"), []byte("package calc\n\nfunc Add(a, b int) int { return a * b }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qam", "change calc")
	out, stderr, code = runWrench(t, ctx, nil, "replay", traj, "--repo", repo, "--data-dir", data, "--deployment", deployment)
	if code != 0 || !strings.Contains(out, "0 diverged") || !strings.Contains(stderr, "on the run's base commit") {
		t.Fatalf("replay after the repository moved: exit %d, want 0 on the recorded base commit\n%s%s", code, out, stderr)
	}
	// Asked for the new head, it reports where the changed code diverges.
	head := strings.TrimSpace(git(t, repo, "rev-parse", "HEAD"))
	out, stderr, code = runWrench(t, ctx, nil, "replay", traj, "--repo", repo, "--commit", head, "--data-dir", data, "--deployment", deployment)
	if code != exitUnresolved || !strings.Contains(out, "first divergence") {
		t.Fatalf("replay on a changed commit: exit %d, want 1 with a divergence\n%s%s", code, out, stderr)
	}
	if n := containersOf(t, deployment); n != 0 {
		t.Errorf("%d containers left", n)
	}
}
