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
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/task"
)

// TestComposeRunsATask walks the setup at the top of compose.yaml, step by
// step as documented there, and nothing else on the host: the image built
// as `make wrench-image` builds it, the data directory made with the
// documented `install -d` (no chown), deploy/.env from env.example, and
// `up -d`. Then a task is driven by the scripted model through the API
// until its patch is resolved. The sandbox image is a scratch image holding
// the host's static busybox (through the documented WRENCH_SANDBOX_IMAGE),
// so nothing is pulled and `make image` is not needed.
func TestComposeRunsATask(t *testing.T) {
	needDocker(t)
	tool := composeTool()
	if tool == nil {
		t.Skip("neither docker-compose nor the docker compose plugin is installed")
	}
	if os.Geteuid() != 0 {
		t.Skip("the documented `sudo install -d -o 1000 ...` needs root")
	}
	steps := composeSteps(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	data := filepath.Join(tmp, "data") // does not exist yet: the install step makes it
	envFile := filepath.Join(tmp, "env")
	port := freePort(t)
	const token = "deploytest-token-0123456789"
	project := "wrenchdeploytest" + strconv.Itoa(os.Getpid())
	var image, sandboxImage string
	env := filteredEnv("WRENCH_", "DOCKER_GID", "OTEL_")
	composeArgs := func(args ...string) []string {
		return append(append(slices.Clone(tool[1:]), "-p", project, "--env-file", envFile,
			"-f", filepath.Join(deployDir(t), "compose.yaml")), args...)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := exec.Command(tool[0], composeArgs("logs", "--no-color", "--tail", "60", "wrench")...).CombinedOutput()
			t.Logf("wrench logs:\n%s", logs)
		}
		cmd := exec.Command(tool[0], composeArgs("down", "-v")...)
		cmd.Dir, cmd.Env = deployDir(t), env
		cmd.Run()
	})
	for _, step := range steps {
		t.Logf("step: %s", step)
		switch {
		case step == "make wrench-image image":
			image = wrenchImage(t)
			sandboxImage = testSandboxImage(t)
		case step == "sudo install -d -o 1000 -g 1000 /var/lib/wrench":
			run(t, "install", "-d", "-o", "1000", "-g", "1000", data)
			writeTrialPolicy(t, data)
		case step == "cp deploy/env.example deploy/.env && chmod 600 deploy/.env":
			copyFile(t, filepath.Join(deployDir(t), "env.example"), envFile, 0o600)
			// "then edit it"
			editEnv(t, envFile, map[string]string{
				"WRENCH_API_TOKEN": token, "DOCKER_GID": strconv.Itoa(socketGID(t)), "WRENCH_DATA": data,
				"WRENCH_SANDBOX_IMAGE": sandboxImage, "WRENCH_PORT": strconv.Itoa(port), "WRENCH_IMAGE": image,
				"WRENCH_POLICY": filepath.Join(data, "policy.yaml"),
			})
		case step == "docker-compose -f deploy/compose.yaml up -d":
			cmd := exec.CommandContext(ctx, tool[0], composeArgs("up", "-d")...)
			cmd.Dir, cmd.Env = deployDir(t), env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("compose up: %v\n%s", err, out)
			}
		default:
			t.Fatalf("compose.yaml documents a step this test does not run: %q", step)
		}
	}

	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	id := resolveExampleTask(ctx, t, base, token, data, "")
	// No sandbox is left once the task is final.
	out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=dev.wrench.deployment=compose",
		"--filter", "label=dev.wrench.task="+id).Output()
	if len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("sandbox containers left behind: %s", out)
	}
	// wrench copied its binary into the data directory, as uid 1000.
	bins, _ := filepath.Glob(filepath.Join(data, "bin", "wrench-*"))
	if len(bins) != 1 {
		t.Errorf("data/bin holds %v, want one copy of the binary", bins)
	} else if fi, err := os.Stat(bins[0]); err == nil && fi.Sys().(*syscall.Stat_t).Uid != 1000 {
		t.Errorf("%s belongs to uid %d, want 1000", bins[0], fi.Sys().(*syscall.Stat_t).Uid)
	}
}

// resolveExampleTask writes a repository and a scripted-model script into
// the data directory (which a containerized wrench sees at the same path),
// submits a task on them (in sandboxImage, "" for the server's default)
// to the API at base, waits until it is final and
// checks that it resolved with the expected patch and is counted in
// /metrics. It returns the task's id.
func resolveExampleTask(ctx context.Context, t *testing.T, base, token, data, sandboxImage string) string {
	t.Helper()
	// A repository and a script for the task, in the data directory the
	// container sees at the same path. The test writes them as root,
	// readable by all: wrench needs nothing more than to read them.
	repo := filepath.Join(data, "e2e", "repo")
	must(t, os.MkdirAll(repo, 0o755))
	must(t, os.WriteFile(filepath.Join(repo, "a.txt"), []byte("hello\n"), 0o644))
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
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

	waitReady(ctx, t, base+"/readyz")
	client := api.NewClient(base, token)
	st0, _, err := client.Submit(ctx, task.Task{
		Repo:        task.Repo{URL: repo},
		Instruction: "Greet the world in a.txt",
		TestCommand: "grep -q world a.txt",
		Model:       "scripted:" + script,
		Image:       sandboxImage,
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
	return st0.TaskID
}

// composeSteps returns the setup commands documented at the top of
// compose.yaml (the indented lines after "once:"), without their comments.
func composeSteps(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir(t), "compose.yaml"))
	must(t, err)
	var steps []string
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasSuffix(line, "once:") {
			in = true
			continue
		}
		if !in {
			continue
		}
		cmd, ok := strings.CutPrefix(line, "#   ")
		if !ok {
			if len(steps) > 0 {
				break
			}
			continue
		}
		if i := strings.Index(cmd, "  #"); i >= 0 {
			cmd = cmd[:i]
		}
		steps = append(steps, strings.TrimSpace(cmd))
	}
	if len(steps) == 0 {
		t.Fatal("compose.yaml documents no setup steps after \"once:\"")
	}
	return steps
}

// editEnv sets keys in an env file as an operator edits it: an existing
// line (commented out or not) is replaced, others are appended.
func editEnv(t *testing.T, path string, values map[string]string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	must(t, err)
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	for k, v := range values {
		found := false
		for i, l := range lines {
			if strings.HasPrefix(strings.TrimPrefix(strings.TrimSpace(l), "# "), k+"=") {
				lines[i], found = k+"="+v, true
			}
		}
		if !found {
			lines = append(lines, k+"="+v)
		}
	}
	must(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
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
