package deploytest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// needDocker skips the test when no Docker engine answers, except under
// CI=true, where it fails.
func needDocker(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no Docker engine (CI=true): %v\n%s", err, out)
		}
		t.Skipf("no Docker engine reachable (%v); this test runs the chart's bootstrap script against one", err)
	}
}

func runBootstrap(t *testing.T, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("sh", filepath.Join(chartDir(t), "files", "bootstrap.sh"))
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestBootstrapScriptSyntax(t *testing.T) {
	if out, err := exec.Command("sh", "-n", filepath.Join(chartDir(t), "files", "bootstrap.sh")).CombinedOutput(); err != nil {
		t.Fatalf("sh -n bootstrap.sh: %v\n%s", err, out)
	}
}

// TestBootstrapScript runs the chart's bootstrap step against the real
// engine: it pulls the sandbox image from a registry that needs the pod's
// image pull secrets, never pulls a reference that names no registry (it
// would come from Docker Hub), refuses to go on without the sandbox image
// or an engine, and gives the data directory to wrench's user. It copies
// no binary: wrench copies itself into the data directory.
func TestBootstrapScript(t *testing.T) {
	needDocker(t)
	uid, gid := strconv.Itoa(os.Getuid()), strconv.Itoa(os.Getgid())
	reg := newTestRegistry(t, "wrench-sandbox", strconv.Itoa(os.Getpid()), "puller", "s3cret-pull")
	rmi := func() { exec.Command("docker", "rmi", "-f", reg.Image).Run() }
	rmi()
	t.Cleanup(rmi)
	secrets := func(configs ...[]byte) string {
		dir := t.TempDir()
		for i, c := range configs {
			must(t, os.MkdirAll(filepath.Join(dir, strconv.Itoa(i)), 0o755))
			must(t, os.WriteFile(filepath.Join(dir, strconv.Itoa(i), "config.json"), c, 0o600))
		}
		return dir
	}

	t.Run("pulls with the pull secrets", func(t *testing.T) {
		t.Cleanup(rmi)
		data := filepath.Join(t.TempDir(), "data")
		out, err := runBootstrap(t, "WRENCH_DATA_DIR="+data, "SANDBOX_IMAGE="+reg.Image, "PULL=true",
			"PULL_SECRETS="+secrets(reg.DockerConfig("puller", "wrong"), reg.DockerConfig("puller", "s3cret-pull")),
			"WRENCH_UID="+uid, "WRENCH_GID="+gid)
		if err != nil {
			t.Fatalf("bootstrap: %v\n%s", err, out)
		}
		if !strings.Contains(out, "pulled "+reg.Image+" with the pull secret in") {
			t.Errorf("output %q does not say which secret pulled", out)
		}
		if err := exec.Command("docker", "image", "inspect", reg.Image).Run(); err != nil {
			t.Errorf("image not in the engine after bootstrap: %v", err)
		}
		if fi, err := os.Stat(data); err != nil || !fi.IsDir() {
			t.Errorf("data directory not made: %v", err)
		}
		if _, err := os.Stat(filepath.Join(data, "bin")); err == nil {
			t.Errorf("bootstrap made %s/bin: wrench copies itself", data)
		}
	})
	t.Run("queue directory on the claim", func(t *testing.T) {
		queue := t.TempDir()
		out, err := runBootstrap(t, "WRENCH_DATA_DIR="+t.TempDir(), "SANDBOX_IMAGE="+reg.Image, "PULL=true",
			"PULL_SECRETS="+secrets(reg.DockerConfig("puller", "s3cret-pull")), "QUEUE_DIR="+queue,
			"WRENCH_UID="+uid, "WRENCH_GID="+gid)
		if err != nil {
			t.Fatalf("bootstrap: %v\n%s", err, out)
		}
		if fi, err := os.Stat(filepath.Join(queue, "nats")); err != nil || !fi.IsDir() {
			t.Errorf("QUEUE_DIR/nats not made: %v", err)
		}
	})
	t.Run("no credentials", func(t *testing.T) {
		out, err := runBootstrap(t, "WRENCH_DATA_DIR="+t.TempDir(), "SANDBOX_IMAGE="+reg.Image, "PULL=true",
			"PULL_SECRETS="+secrets(reg.DockerConfig("puller", "wrong")))
		if err == nil || !strings.Contains(out, "pulling "+reg.Image+" failed") {
			t.Fatalf("err %v, output %q: want a failed pull", err, out)
		}
	})
	t.Run("no registry, no Docker Hub", func(t *testing.T) {
		// A name on Docker Hub that must never be pulled; the engine is
		// not asked (a pull would fail here anyway: no registry is
		// reachable), and the message says why.
		out, err := runBootstrap(t, "WRENCH_DATA_DIR="+t.TempDir(), "SANDBOX_IMAGE=wrench-deploytest-absent:none", "PULL=true")
		if err == nil || !strings.Contains(out, "names no registry") || !strings.Contains(out, "is not in the engine") {
			t.Fatalf("err %v, output %q: want no pull and a refusal naming the missing image", err, out)
		}
	})
	t.Run("no engine", func(t *testing.T) {
		out, err := runBootstrap(t, "WRENCH_DATA_DIR="+t.TempDir(), "SANDBOX_IMAGE="+reg.Image,
			"PULL=false", "ENGINE_WAIT=1", "DOCKER_HOST=unix:///nonexistent/docker.sock")
		if err == nil || !strings.Contains(out, "no Docker engine answers") {
			t.Fatalf("err %v, output %q: want a refusal naming the engine", err, out)
		}
	})
}
