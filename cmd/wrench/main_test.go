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
	code := m.Run()
	os.RemoveAll(dir)
	removeTestSnapshots()
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

// testDeployment names a deployment of this test process: test-<kind>-
// then the process's own mark, then a unique number, so that
// removeTestSnapshots removes this process's snapshots and never those
// of another run of these tests going on at the same time.
func testDeployment(kind string) string {
	return fmt.Sprintf("test-%s-%s-%d", kind, processMark, time.Now().UnixNano())
}

// processMark tells this test process's deployments from others'.
var processMark = fmt.Sprintf("p%d", os.Getpid())

// removeTestSnapshots removes the environment snapshots this process's
// tests (deployments named by testDeployment) saved.
func removeTestSnapshots() {
	out, err := exec.Command("docker", "images", "--filter", "label=dev.wrench.env.key",
		"--format", `{{.ID}} {{.Repository}}:{{.Tag}}`).Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		// The tag names the deployment: wrench-env:<deployment>-<key>.
		id, ref, ok := strings.Cut(line, " ")
		if ok && strings.Contains(ref, ":test-") && strings.Contains(ref, "-"+processMark+"-") {
			exec.Command("docker", "rmi", "-f", id).Run()
		}
	}
}
