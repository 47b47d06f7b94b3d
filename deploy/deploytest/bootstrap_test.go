package deploytest

import (
	"archive/tar"
	"bytes"
	"fmt"
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

// fakeWrenchImage imports an image holding only /usr/local/bin/wrench with
// content, and removes it when the test ends.
func fakeWrenchImage(t *testing.T, content string) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"usr/", "usr/local/", "usr/local/bin/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: "usr/local/bin/wrench", Mode: 0o755, Size: int64(len(content))}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte(content))
	tw.Close()
	tag := fmt.Sprintf("wrench-deploytest-bootstrap:%d", os.Getpid())
	cmd := exec.Command("docker", "import", "--change", `ENTRYPOINT ["/usr/local/bin/wrench"]`, "-", tag)
	cmd.Stdin = &buf
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker import: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", tag).Run() })
	return tag
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
// engine: it must copy the binary out of Wrench's image into the data
// directory, leave no container behind, and refuse to go on without the
// sandbox image or an engine.
func TestBootstrapScript(t *testing.T) {
	needDocker(t)
	const content = "#!/bin/sh\necho not really wrench\n"
	img := fakeWrenchImage(t, content)
	ids := func() string {
		out, _ := exec.Command("docker", "ps", "-aq", "--filter", "ancestor="+img).Output()
		return strings.TrimSpace(string(out))
	}
	uid, gid := strconv.Itoa(os.Getuid()), strconv.Itoa(os.Getgid())

	t.Run("copies the binary", func(t *testing.T) {
		data := filepath.Join(t.TempDir(), "data")
		out, err := runBootstrap(t, "WRENCH_DATA_DIR="+data, "WRENCH_IMAGE="+img, "SANDBOX_IMAGE="+img,
			"PULL=false", "WRENCH_UID="+uid, "WRENCH_GID="+gid)
		if err != nil {
			t.Fatalf("bootstrap: %v\n%s", err, out)
		}
		bin := filepath.Join(data, "bin", "wrench")
		got, err := os.ReadFile(bin)
		if err != nil || string(got) != content {
			t.Fatalf("copied binary %q, %v; want the image's", got, err)
		}
		if fi, _ := os.Stat(bin); fi.Mode().Perm() != 0o755 {
			t.Errorf("mode %v, want 0755", fi.Mode().Perm())
		}
		if left := ids(); left != "" {
			t.Errorf("bootstrap left containers behind: %s", left)
		}
		// A second run (a pod restart) replaces the copy in place.
		if out, err := runBootstrap(t, "WRENCH_DATA_DIR="+data, "WRENCH_IMAGE="+img, "SANDBOX_IMAGE="+img,
			"PULL=false", "WRENCH_UID="+uid, "WRENCH_GID="+gid); err != nil {
			t.Fatalf("second bootstrap: %v\n%s", err, out)
		}
	})
	t.Run("sandbox image missing", func(t *testing.T) {
		out, err := runBootstrap(t, "WRENCH_DATA_DIR="+t.TempDir(), "WRENCH_IMAGE="+img,
			"SANDBOX_IMAGE=wrench-deploytest-absent:none", "PULL=false")
		if err == nil || !strings.Contains(out, "is not in the engine") {
			t.Fatalf("err %v, output %q: want a refusal naming the missing image", err, out)
		}
	})
	t.Run("no engine", func(t *testing.T) {
		out, err := runBootstrap(t, "WRENCH_DATA_DIR="+t.TempDir(), "WRENCH_IMAGE="+img, "SANDBOX_IMAGE="+img,
			"PULL=false", "ENGINE_WAIT=1", "DOCKER_HOST=unix:///nonexistent/docker.sock")
		if err == nil || !strings.Contains(out, "no Docker engine answers") {
			t.Fatalf("err %v, output %q: want a refusal naming the engine", err, out)
		}
	})
}
