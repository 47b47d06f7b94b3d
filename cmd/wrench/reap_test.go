package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/api"
)

// TestKilledRunIsReapedOnNextStart SIGKILLs `wrench run` twice: while a
// setup runs `sleep 60` (leaving the setup sandbox and the host clone being
// copied into it) and while its agent runs `sleep 60` in the sandbox (the
// workspace lives in the sandbox: a container and no host clone), and
// then shows the next `wrench run` of the same deployment ends with
// neither left.
func TestKilledRunIsReapedOnNextStart(t *testing.T) {
	requireImage(t)
	repo := gitRepo(t, "go-calc")
	slowSetup := gitRepo(t, "go-calc")
	if err := os.WriteFile(filepath.Join(slowSetup, ".wrench.yaml"), []byte("setup: [\"echo preparing; sleep 60\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, slowSetup, "add", "-A")
	git(t, slowSetup, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "slow setup")
	data := t.TempDir()
	workspaces := filepath.Join(data, "workspaces")
	deployment := testDeployment("reap")
	t.Cleanup(func() {
		if n := containersOf(t, deployment); n != 0 {
			exec.Command("sh", "-c", "docker rm -f $(docker ps -aq --filter label=dev.wrench.deployment="+deployment+")").Run()
		}
	})
	script := filepath.Join(t.TempDir(), "sleep.yaml")
	if err := os.WriteFile(script, []byte(`steps:
  - tool_calls:
      - name: bash
        arguments: {command: "echo sleeping; sleep 60", timeout_s: 120}
  - tool_calls:
      - name: finish
        arguments: {summary: "slept"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	kill := func(repo string) {
		t.Helper()
		victim := exec.CommandContext(ctx, wrenchBin, "run", "--repo", repo, "--task", "Sleep.", "--test", "go test ./...",
			"--model", "scripted:"+script, "--data-dir", data, "--deployment", deployment, "--quiet")
		if err := victim.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait until the command runs inside the sandbox.
		for !sleeping(t, deployment) {
			if ctx.Err() != nil {
				victim.Process.Kill()
				victim.Wait()
				t.Fatal("the sandbox never ran the sleep")
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err := victim.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		victim.Wait()
	}
	kill(slowSetup)
	if n, w := containersOf(t, deployment), entries(t, workspaces); n != 1 || w != 1 {
		t.Fatalf("after SIGKILL in setup: %d containers and %d workspaces, want the crash to leave 1 and 1", n, w)
	}
	kill(repo) // its own start reaps the first crash's leftovers
	if n, w := containersOf(t, deployment), entries(t, workspaces); n != 1 || w != 0 {
		t.Fatalf("after SIGKILL in the agent phase: %d containers and %d workspaces, want the crash to leave 1 and 0", n, w)
	}

	fix := filepath.Join(moduleRoot(t), "examples", "go-calc", "fix.yaml")
	_, stderr, code := runWrench(t, ctx, nil, "run", "--repo", repo, "--task", "Make the tests pass.", "--test", "go test ./...",
		"--model", "scripted:"+fix, "--data-dir", data, "--deployment", deployment, "--out", filepath.Join(t.TempDir(), "fix.patch"))
	if code != 0 {
		t.Fatalf("next run: exit %d\n%s", code, stderr)
	}
	if n := containersOf(t, deployment); n != 0 {
		t.Errorf("%d containers left after the next start", n)
	}
	if n := entries(t, workspaces); n != 0 {
		t.Errorf("%d workspaces left after the next start", n)
	}
}

// sleeping reports whether a container of deployment runs `sleep 60`.
func sleeping(t *testing.T, deployment string) bool {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-q", "--filter", "label=dev.wrench.deployment="+deployment).Output()
	if err != nil || len(out) == 0 {
		return false
	}
	id := string(out[:12])
	top, err := exec.Command("docker", "top", id, "-o", "pid,args").Output()
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(top), "\n") {
		if strings.HasSuffix(strings.TrimSpace(line), " sleep 60") {
			return true
		}
	}
	return false
}

// TestWorkerReapsFinalTasksContainers: a container of a task whose state is
// final goes as soon as a worker sees it, though its owner process lives;
// the worker counts it by cause.
func TestWorkerReapsFinalTasksContainers(t *testing.T) {
	requireImage(t)
	deployment := testDeployment("reap-final")
	t.Cleanup(func() { removeContainers(deployment) })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, apiURL, natsURL, natsSeed := startServeProc(t, ctx, "--slots", "0", "--data-dir", t.TempDir(), "--deployment", deployment)
	repo, script := helloRepo(t, 0)
	c := api.NewClient(apiURL, "")
	if _, _, err := c.Submit(ctx, helloTask("t-final", repo, script)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, "t-final"); err != nil {
		t.Fatal(err)
	}
	// A container of it whose owner (this test) is alive.
	host, _ := os.Hostname()
	out, err := exec.Command("docker", "run", "-d", "--network", "none",
		"--label", "dev.wrench.managed=true", "--label", "dev.wrench.deployment="+deployment, "--label", "dev.wrench.task=t-final",
		"--label", "dev.wrench.owner-host="+host, "--label", fmt.Sprintf("dev.wrench.owner-pid=%d", os.Getpid()),
		"--label", "dev.wrench.created="+time.Now().UTC().Format(time.RFC3339),
		defaultImage, "sleep", "300").CombinedOutput()
	if err != nil {
		t.Fatalf("docker run: %v: %s", err, out)
	}
	w := startProc(t, "worker", "worker", "--nats", natsURL, "--nats-nkey", natsSeed, "--slots", "1", "--http", "127.0.0.1:0",
		"--data-dir", t.TempDir(), "--deployment", deployment, "--log-level", "info")
	metricsURL := strings.TrimSpace(w.line(t, ctx, "wrench worker: metrics on "))
	w.line(t, ctx, "wrench worker: ")
	waitUntil(t, ctx, "the container to be reaped", func() bool { return containersOf(t, deployment) == 0 })
	waitUntil(t, ctx, "the removal to be counted", func() bool {
		_, m := httpGet(t, metricsURL)
		return strings.Contains(m, `wrench_orphans_reaped_total{cause="task_final",kind="container"} 1`)
	})
}
