package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/dispatcher"
	"github.com/wrenchworks/wrench/task"
)

// TestResultDownloadsArtifacts: the trajectory and log a worker kept are
// downloaded with wrench result --trajectory/--log (for wrench replay).
func TestResultDownloadsArtifacts(t *testing.T) {
	const traj = `{"seq":1,"kind":"run_start","base_commit":"0123456789abcdef"}` + "\n"
	fake := fakeRunner(nil)
	runner := dispatcher.RunnerFunc(func(ctx context.Context, tk task.Task, attempt int, onEvent func(task.Event)) task.Report {
		rep := fake.Run(ctx, tk, attempt, onEvent)
		rep.Artifacts = map[string][]byte{"trajectory.jsonl": []byte(traj), "log.txt": []byte("the run's log\n")}
		rep.Result.Artifacts = []string{"log.txt", "trajectory.jsonl"}
		return rep
	})
	srv := startServe(t, t.TempDir(), "", runner)
	code, out, errOut := wrench(t, srv, "submit", "--repo", "https://example.com/r.git", "--task", "resolve", "--wait")
	if code != exitOK {
		t.Fatalf("submit: %d %s", code, errOut)
	}
	id := strings.TrimSpace(out)
	dir := t.TempDir()
	tf, lf := filepath.Join(dir, "t.jsonl"), filepath.Join(dir, "log.txt")
	if code, _, errOut = wrench(t, srv, "result", id, "--trajectory", tf, "--log", lf, "--patch", filepath.Join(dir, "p")); code != exitOK {
		t.Fatalf("result: %d %s", code, errOut)
	}
	if b, _ := os.ReadFile(tf); string(b) != traj {
		t.Errorf("trajectory %q", b)
	}
	if b, _ := os.ReadFile(lf); string(b) != "the run's log\n" {
		t.Errorf("log %q", b)
	}
}
