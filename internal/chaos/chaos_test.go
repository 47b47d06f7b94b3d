package chaos

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// TestChaos is the short fault suite CI runs on every change: at least
// 100 tasks on serve and three workers, every fault aimed three times and
// injected at least twice, and every invariant holds. WRENCH_CHAOS_TASKS
// and WRENCH_CHAOS_SEED change the run (the seed is printed either way).
func TestChaos(t *testing.T) {
	requireImage(t)
	tasks := envInt(t, "WRENCH_CHAOS_TASKS", 100)
	seed := uint64(envInt(t, "WRENCH_CHAOS_SEED", int(time.Now().UnixNano()%100000)))
	bin := buildWrench(t)
	var log bytes.Buffer
	cfg := Config{Bin: bin, Dir: t.TempDir(), Tasks: tasks, Seed: seed, FaultsPerKind: 3, Timeout: 20 * time.Minute,
		Log: slog.New(slog.NewTextHandler(&log, nil))}
	t.Logf("seed %d (WRENCH_CHAOS_SEED=%d reproduces the plan), %d tasks", seed, seed, tasks)
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Logf("progress:\n%s", log.String())
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Print(&out)
	t.Logf("report:\n%s", out.String())
	for _, k := range Kinds {
		if n := rep.Injected(k); n < 2 {
			t.Errorf("%s injected %d times, want at least 2", k, n)
		}
	}
	if n := rep.Violations(); n > 0 {
		t.Errorf("%d invariant violations (process logs in %s)", n, rep.Logs)
	}
	if t.Failed() {
		t.Logf("progress:\n%s", log.String())
	}
}

// requireImage skips when Docker or the default sandbox image is missing,
// except under CI=true, where the suite must run.
func requireImage(t *testing.T) {
	t.Helper()
	err := exec.Command("docker", "image", "inspect", "wrench-sandbox:default").Run()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true but Docker or the image wrench-sandbox:default is missing (make image): %v", err)
	}
	t.Skipf("Docker or the image wrench-sandbox:default is missing (make image): %v", err)
}

// buildWrench builds the wrench binary (static: it is also the sandbox's
// helper) into the test's temporary directory.
func buildWrench(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	bin := filepath.Join(t.TempDir(), "wrench")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/wrench")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build wrench: %v\n%s", err, out)
	}
	return bin
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q is not a number", name, v)
	}
	return n
}
