package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// wrenchBin is the wrench binary built once for the tests that run it as a
// separate process (it is also the in-sandbox helper, so it must be static).
var wrenchBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wrench-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	wrenchBin = filepath.Join(dir, "wrench")
	build := exec.Command("go", "build", "-o", wrenchBin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build wrench: %v\n%s", err, out)
		os.Exit(1)
	}
	started := time.Now()
	code := m.Run()
	os.RemoveAll(dir)
	removeTestSnapshots(started)
	os.Exit(code)
}

// moduleRoot is the directory holding go.mod.
func moduleRoot(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// requireDocker skips when no engine is reachable, except under CI=true.
func requireDocker(t testing.TB) {
	t.Helper()
	if err := exec.Command("docker", "info").Run(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but no Docker engine is reachable: %v", err)
		}
		t.Skipf("no Docker engine reachable (%v); skipping", err)
	}
}

// requireImage skips when the default sandbox image is missing (build it
// with `make image`), except under CI=true.
func requireImage(t testing.TB) {
	t.Helper()
	requireDocker(t)
	if err := exec.Command("docker", "image", "inspect", defaultImage).Run(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but image %s is missing (make image)", defaultImage)
		}
		t.Skipf("image %s missing; run `make image`", defaultImage)
	}
}

// gitRepo copies an example into a fresh git repository and returns its path.
func gitRepo(t testing.TB, example string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), example)
	if out, err := exec.Command("cp", "-r", filepath.Join(moduleRoot(t), "examples", example), dst).CombinedOutput(); err != nil {
		t.Fatalf("copy example: %v\n%s", err, out)
	}
	git(t, dst, "init", "-q", "-b", "main")
	git(t, dst, "add", "-A")
	git(t, dst, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "initial")
	return dst
}

func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// runWrench runs the built binary and returns stdout, stderr and the exit code.
func runWrench(t testing.TB, ctx context.Context, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, wrenchBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run wrench: %v", err)
	}
	return stdout.String(), stderr.String(), code
}

// containersOf counts the containers carrying a deployment label.
func containersOf(t testing.TB, deployment string) int {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=dev.wrench.deployment="+deployment).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return len(strings.Fields(string(out)))
}

// entries counts what a directory holds (0 when it does not exist).
func entries(t testing.TB, dir string) int {
	t.Helper()
	list, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

func TestDispatchUsage(t *testing.T) {
	var out, errb bytes.Buffer
	env := &cliEnv{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	if code := dispatch(context.Background(), env, []string{"nope"}); code != exitBadInput {
		t.Fatalf("unknown command: exit %d", code)
	}
	if !strings.Contains(errb.String(), `unknown command "nope"`) || !strings.Contains(errb.String(), "run ") {
		t.Fatalf("usage text: %s", errb.String())
	}
}

// removeTestSnapshots removes the environment snapshots this run's tests
// (deployments named test-…) saved while they ran. Other packages' tests
// running at the same time name theirs otherwise (wrench-test-…) and keep
// them; a concurrent run of these tests that loses one only rebuilds it.
func removeTestSnapshots(since time.Time) {
	out, err := exec.Command("docker", "images", "--filter", "label=dev.wrench.env.key",
		"--format", `{{.ID}} {{.CreatedAt}} {{.Repository}}:{{.Tag}}`).Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || !strings.Contains(f[len(f)-1], ":test-") {
			continue
		}
		created, err := time.Parse("2006-01-02 15:04:05 -0700", strings.Join(f[1:4], " "))
		if err != nil || created.Before(since) {
			continue
		}
		exec.Command("docker", "rmi", "-f", f[0]).Run()
	}
}
