package deploytest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
)

var (
	wrenchImageOnce sync.Once
	wrenchImageTag  string
	wrenchImageErr  error
)

// wrenchImage builds Wrench's image as `make wrench-image` does: the
// binary, scripts/image-files.sh's CA bundle and skeleton next to it in
// bin/, then `docker build` of the repository's Dockerfile with its
// .dockerignore (in a copy of just those, so the checkout's bin/ is left
// alone). It is built once per test binary and removed by TestMain.
func wrenchImage(t *testing.T) string {
	t.Helper()
	needDocker(t)
	root := repoRoot(t)
	bin := wrenchBinary(t)
	wrenchImageOnce.Do(func() {
		ctx, err := os.MkdirTemp("", "wrench-image-")
		if err != nil {
			wrenchImageErr = err
			return
		}
		defer os.RemoveAll(ctx)
		steps := [][]string{
			{"cp", filepath.Join(root, "Dockerfile"), filepath.Join(root, ".dockerignore"), ctx},
			{"mkdir", "-p", filepath.Join(ctx, "bin")},
			{"cp", bin, filepath.Join(ctx, "bin", "wrench")},
			{filepath.Join(root, "scripts", "image-files.sh"), filepath.Join(ctx, "bin")},
			{"docker", "build", "-q", "-t", "wrench-deploytest:" + strconv.Itoa(os.Getpid()), ctx},
		}
		for _, s := range steps {
			if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
				wrenchImageErr = fmt.Errorf("%v: %v\n%s", s, err, out)
				return
			}
		}
		wrenchImageTag = "wrench-deploytest:" + strconv.Itoa(os.Getpid())
	})
	if wrenchImageErr != nil {
		t.Fatal(wrenchImageErr)
	}
	return wrenchImageTag
}

// removeWrenchImage removes what wrenchImage built (from TestMain).
func removeWrenchImage() {
	if wrenchImageTag != "" {
		exec.Command("docker", "rmi", "-f", wrenchImageTag).Run()
	}
}

// TestImageRunsAsNonRoot: the image's default user is uid/gid 1000, its
// data directory belongs to that user and it has a world-writable /tmp.
func TestImageRunsAsNonRoot(t *testing.T) {
	img := wrenchImage(t)
	out, err := exec.Command("docker", "image", "inspect", "--format", "{{json .Config}}", img).Output()
	must(t, err)
	var cfg struct {
		User string
		Env  []string
	}
	must(t, json.Unmarshal(out, &cfg))
	// The sandboxes' user, so it owns the workspaces without a capability.
	if cfg.User != sandbox.User() {
		t.Errorf("image user %q, want %s", cfg.User, sandbox.User())
	}
	// The file system, read from an exported container (the image has no
	// shell to ask).
	id := strings.TrimSpace(run(t, "docker", "create", img))
	defer exec.Command("docker", "rm", "-f", id).Run()
	listing := run(t, "sh", "-c", "docker export "+id+" | tar -tvf - tmp var/lib/wrench")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^drwxrwxrwt .* tmp/$`),
		regexp.MustCompile(`(?m)^drwxr-xr-x 1000/1000 .* var/lib/wrench/$`),
	} {
		if !want.MatchString(listing) {
			t.Errorf("image file system lacks %s:\n%s", want, listing)
		}
	}
}

// TestImageDataDirEngineCannotSee runs the image as an operator might get
// it wrong: the data directory on a named volume, which the engine cannot
// see at /var/lib/wrench. `wrench doctor` names the problem and the fix,
// and `wrench serve` refuses to start, saying the same, instead of failing
// every task.
func TestImageDataDirEngineCannotSee(t *testing.T) {
	img := wrenchImage(t)
	sandboxImage := testSandboxImage(t)
	vol := "wrench-deploytest-" + strconv.Itoa(os.Getpid())
	t.Cleanup(func() { exec.Command("docker", "volume", "rm", "-f", vol).Run() })
	sock := socketGID(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dockerRun := func(args ...string) ([]byte, error) {
		name := fmt.Sprintf("%s-%s", vol, args[0])
		t.Cleanup(func() { exec.Command("docker", "rm", "-f", name).Run() })
		base := []string{"run", "--rm", "--name", name, "-v", vol + ":/var/lib/wrench", "-v", "/var/run/docker.sock:/var/run/docker.sock",
			"--group-add", strconv.Itoa(sock), "-e", "WRENCH_API_TOKEN=deploytest-token-0123456789", img}
		return exec.CommandContext(ctx, "docker", append(base, args...)...).CombinedOutput()
	}

	out, err := dockerRun("doctor", "--image", sandboxImage)
	if err == nil {
		t.Errorf("doctor succeeded:\n%s", out)
	}
	for _, want := range []string{"PROBLEM mounts: the engine cannot see /var/lib/wrench", "fix: mount the data directory at the same path"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}

	out, err = dockerRun("serve", "--http", "0.0.0.0:7070", "--image", sandboxImage)
	if ctx.Err() != nil {
		t.Fatalf("serve kept running with a data directory the engine cannot see:\n%s", out)
	}
	if err == nil {
		t.Errorf("serve exited 0:\n%s", out)
	}
	if !regexp.MustCompile(`wrench serve: the docker engine cannot see /var/lib/wrench/bin/wrench-\d+-\d+, /var/lib/wrench/egress at the same path`).Match(out) ||
		!strings.Contains(string(out), "mount the data directory at the same path") {
		t.Errorf("serve does not name the paths and the fix:\n%s", out)
	}
}

// testSandboxImage is a busybox sandbox image for the tests that run
// tasks through Wrench's image (nothing is pulled).
func testSandboxImage(t *testing.T) string {
	t.Helper()
	busybox, err := exec.LookPath("busybox")
	if err != nil || !staticELF(busybox) {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: needs a static busybox on the host (Debian: busybox-static) for the sandbox image")
		}
		t.Skip("needs a static busybox on the host (Debian: busybox-static) for the sandbox image")
	}
	return busyboxImage(t, busybox, "wrench-sandbox:deploytest-"+strconv.Itoa(os.Getpid())+"-"+strings.ToLower(regexp.MustCompile(`\W`).ReplaceAllString(t.Name(), "")))
}

func socketGID(t *testing.T) int {
	t.Helper()
	fi, err := os.Stat("/var/run/docker.sock")
	must(t, err)
	return int(fi.Sys().(*syscall.Stat_t).Gid)
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// TestImageDockerRunLine runs the `docker run` lines documented at the top
// of the Dockerfile, as written there but for the data directory (the
// `data=` line), the published port and the image's tag, and resolves a
// task through the container it starts.
func TestImageDockerRunLine(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the documented `sudo install -d -o 1000 ...` needs root")
	}
	img := wrenchImage(t)
	sandboxImage := testSandboxImage(t)
	data := filepath.Join(t.TempDir(), "data")
	port := freePort(t)
	const token = "deploytest-token-0123456789"
	script := dockerfileRunLines(t)
	script = regexp.MustCompile(`(?m)^data=.*$`).ReplaceAllString(script, "data="+data)
	script = strings.Replace(script, "127.0.0.1:7070:7070", fmt.Sprintf("127.0.0.1:%d:7070", port), 1)
	script = strings.Replace(script, " wrench:dev", " "+img, 1)
	script = strings.ReplaceAll(script, "sudo ", "")
	must(t, os.MkdirAll(data, 0o755))
	writeTrialPolicy(t, data)
	cmd := exec.Command("sh", "-ec", script)
	cmd.Env = append(filteredEnv("WRENCH_"), "WRENCH_API_TOKEN="+token, "WRENCH_POLICY="+filepath.Join(data, "policy.yaml"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("documented lines failed: %v\n%s", err, script)
	}
	id := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := exec.Command("docker", "logs", "--tail", "60", id).CombinedOutput()
			t.Logf("wrench logs:\n%s", logs)
		}
		exec.Command("docker", "rm", "-f", id).Run()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitReady(ctx, t, base+"/readyz")
	resolveExampleTask(ctx, t, base, token, data, sandboxImage)
}

// dockerfileRunLines returns the shell lines the Dockerfile documents after
// "explains each part:", continuation lines joined.
func dockerfileRunLines(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "Dockerfile"))
	must(t, err)
	var b strings.Builder
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasSuffix(line, "explains each part:") {
			in = true
			continue
		}
		if !in {
			continue
		}
		l, ok := strings.CutPrefix(line, "#   ")
		if !ok {
			break
		}
		b.WriteString(strings.TrimSpace(l) + "\n")
	}
	if b.Len() == 0 {
		t.Fatal("the Dockerfile documents no docker run lines")
	}
	return b.String()
}

// writeTrialPolicy writes <data>/policy.yaml, a server policy that lets
// tasks name paths on the server's disk and scripted models: the end-to-end
// tests drive a repository and a script in the data directory through a
// server that listens beyond loopback, which the built-in policy refuses.
func writeTrialPolicy(t *testing.T, data string) {
	t.Helper()
	must(t, os.WriteFile(filepath.Join(data, "policy.yaml"),
		[]byte("defaults:\n  local_paths: true\n  scripted_models: true\n"), 0o644))
}
