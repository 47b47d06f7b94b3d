package deploytest

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/task"
)

// TestComposeRunsATask brings up compose.yaml's wrench service for real:
// Wrench's image built from the repository's Dockerfile, the host's Docker
// socket, the data directory at the same path, and a task driven by the
// scripted model through the API until its patch is resolved. The sandbox
// image is a scratch image holding the host's static busybox, so nothing is
// pulled.
func TestComposeRunsATask(t *testing.T) {
	needDocker(t)
	tool := composeTool()
	if tool == nil {
		t.Skip("neither docker-compose nor the docker compose plugin is installed")
	}
	if os.Geteuid() != 0 && os.Geteuid() != 1000 {
		t.Skip("needs root (or uid 1000) to give the data directory to uid 1000, as the Compose setup does")
	}
	busybox, err := exec.LookPath("busybox")
	if err != nil || !staticELF(busybox) {
		t.Skip("needs a static busybox on the host (Debian: busybox-static) for the sandbox image")
	}
	root := repoRoot(t)
	tag := strconv.Itoa(os.Getpid())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := func(dir string, env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return string(out)
	}

	// Wrench's image, from the repository's Dockerfile.
	buildCtx := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(buildCtx, "bin"), 0o755))
	copyFile(t, filepath.Join(root, "Dockerfile"), filepath.Join(buildCtx, "Dockerfile"), 0o644)
	copyFile(t, wrenchBinary(t), filepath.Join(buildCtx, "bin", "wrench"), 0o755)
	if _, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); err == nil {
		copyFile(t, "/etc/ssl/certs/ca-certificates.crt", filepath.Join(buildCtx, "bin", "ca-certificates.crt"), 0o644)
	} else {
		must(t, os.WriteFile(filepath.Join(buildCtx, "bin", "ca-certificates.crt"), nil, 0o644))
	}
	image := "wrench-deploytest:" + tag
	run(buildCtx, os.Environ(), "docker", "build", "-q", "-t", image, ".")
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", image).Run() })
	sandboxImage := busyboxImage(t, busybox, "wrench-deploytest-sandbox:"+tag)

	// The host side of the install step: the data directory owned by
	// uid 1000 with the binary in it, and a repository and script there.
	data := t.TempDir()
	must(t, os.Chmod(data, 0o755))
	copyFile(t, wrenchBinary(t), filepath.Join(data, "bin", "wrench"), 0o755)
	repo := filepath.Join(data, "e2e", "repo")
	must(t, os.MkdirAll(repo, 0o755))
	must(t, os.WriteFile(filepath.Join(repo, "a.txt"), []byte("hello\n"), 0o644))
	git := func(args ...string) {
		run(repo, os.Environ(), "git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
	}
	git("init", "-q", "-b", "main")
	git("add", "a.txt")
	git("commit", "-qm", "init")
	script := filepath.Join(data, "e2e", "fix.yaml")
	must(t, os.WriteFile(script, []byte(`steps:
  - tool_calls:
      - name: view
        arguments: {path: a.txt}
  - expect_observation: "hello"
    tool_calls:
      - name: write
        arguments: {path: a.txt, content: "hello, world\n"}
  - tool_calls:
      - name: finish
        arguments: {summary: "Greeted the world."}
`), 0o644))
	run(data, os.Environ(), "chown", "-R", "1000:1000", data)

	// compose.yaml, with only the image name overridden.
	override := filepath.Join(t.TempDir(), "override.yaml")
	must(t, os.WriteFile(override, []byte("services:\n  wrench:\n    image: "+image+"\n"), 0o644))
	port := freePort(t)
	fi, err := os.Stat("/var/run/docker.sock")
	must(t, err)
	sockGID := fi.Sys().(*syscall.Stat_t).Gid
	const token = "deploytest-token-0123456789"
	env := append(filteredEnv("WRENCH_", "DOCKER_GID", "OTEL_"),
		"WRENCH_API_TOKEN="+token, "DOCKER_GID="+strconv.Itoa(int(sockGID)), "WRENCH_DATA="+data,
		"WRENCH_SANDBOX_IMAGE="+sandboxImage, "WRENCH_PORT="+strconv.Itoa(port))
	project := "wrenchdeploytest" + tag
	compose := func(args ...string) string {
		base := append(slices.Clone(tool[1:]), "-p", project, "-f", filepath.Join(deployDir(t), "compose.yaml"), "-f", override)
		return run(deployDir(t), env, tool[0], append(base, args...)...)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := exec.Command(tool[0], append(slices.Clone(tool[1:]), "-p", project, "-f", filepath.Join(deployDir(t), "compose.yaml"), "-f", override, "logs", "--no-color", "--tail", "60", "wrench")...).CombinedOutput()
			t.Logf("wrench logs:\n%s", logs)
		}
		cmd := exec.Command(tool[0], append(slices.Clone(tool[1:]), "-p", project, "-f", filepath.Join(deployDir(t), "compose.yaml"), "-f", override, "down", "-v")...)
		cmd.Dir, cmd.Env = deployDir(t), env
		cmd.Run()
	})
	compose("up", "-d", "--no-build", "wrench")

	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitReady(ctx, t, base+"/readyz")
	client := api.NewClient(base, token)
	st0, _, err := client.Submit(ctx, task.Task{
		Repo:        task.Repo{URL: repo},
		Instruction: "Greet the world in a.txt",
		TestCommand: "grep -q world a.txt",
		Model:       "scripted:" + script,
		Source:      task.Source{Kind: "api"},
	})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	var final task.Status
	for {
		final, err = client.Status(ctx, st0.TaskID)
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		if final.State.Final() {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("task %s still %s: %v", st0.TaskID, final.State, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
	if final.State != task.StateResolved {
		t.Fatalf("task ended %s (%s), want resolved", final.State, final.Reason)
	}
	patch, err := client.Patch(ctx, st0.TaskID)
	if err != nil || !bytes.Contains([]byte(patch), []byte("+hello, world")) {
		t.Errorf("patch %q, %v", patch, err)
	}
	// /metrics answers without the token, with the task counted.
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(body, []byte(`wrench_tasks_finished_total{status="resolved"} 1`)) {
		t.Errorf("/metrics does not count the resolved task")
	}
	// No sandbox is left once the task is final.
	out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=dev.wrench.deployment=compose",
		"--filter", "label=dev.wrench.task="+st0.TaskID).Output()
	if len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("sandbox containers left behind: %s", out)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	must(t, err)
	must(t, os.MkdirAll(filepath.Dir(dst), 0o755))
	must(t, os.WriteFile(dst, b, mode))
	must(t, os.Chmod(dst, mode))
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func waitReady(ctx context.Context, t *testing.T, url string) {
	t.Helper()
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never became ready: %v", url, err)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// busyboxImage imports a scratch image holding a static busybox as /bin/sh
// and friends, writable /workspace, removed when the test ends.
func busyboxImage(t *testing.T, busybox, tag string) string {
	t.Helper()
	bin, err := os.ReadFile(busybox)
	must(t, err)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"bin/", "workspace/", "tmp/", "home/", "home/wrench/"} {
		must(t, tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755}))
	}
	must(t, tw.WriteHeader(&tar.Header{Name: "bin/busybox", Mode: 0o755, Size: int64(len(bin))}))
	tw.Write(bin)
	for _, applet := range []string{"sh", "true", "grep", "cat", "ls", "echo"} {
		must(t, tw.WriteHeader(&tar.Header{Name: "bin/" + applet, Typeflag: tar.TypeSymlink, Linkname: "busybox"}))
	}
	must(t, tw.Close())
	cmd := exec.Command("docker", "import", "-", tag)
	cmd.Stdin = &buf
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker import: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", tag).Run() })
	return tag
}

// staticELF reports whether path is an ELF executable without an
// interpreter.
func staticELF(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}
