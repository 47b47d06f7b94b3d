package docker_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/docker"
	"github.com/wrenchworks/wrench/sandbox/docker/dockertest"
)

func TestStartInvalid(t *testing.T) {
	f := newFixture(t, nil)
	tests := []struct {
		name string
		spec sandbox.Spec
		want string
	}{
		{"negative memory", sandbox.Spec{MemoryBytes: -1}, "memory"},
		{"tiny memory", sandbox.Spec{MemoryBytes: 1 << 20}, "memory"},
		{"negative pids", sandbox.Spec{Pids: -5}, "pids"},
		{"tiny disk", sandbox.Spec{DiskBytes: 100}, "disk"},
		{"negative timeout", sandbox.Spec{Timeout: -time.Second}, "timeout"},
		{"more cpus than the engine", sandbox.Spec{NanoCPUs: 4096e9}, "cpus"},
		{"host network", sandbox.Spec{Network: "host"}, "network"},
		{"relative workspace", sandbox.Spec{WorkspaceDir: "ws"}, "workspace"},
		{"missing workspace", sandbox.Spec{WorkspaceDir: "/nonexistent/ws"}, "workspace"},
		{"bad env", sandbox.Spec{Env: map[string]string{"A=B": "c"}}, "environment"},
		{"image name not lower case", sandbox.Spec{Image: "Upper/Case:v1"}, "image"},
		{"image name with spaces", sandbox.Spec{Image: "bad image"}, "image"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb, err := f.p.Start(context.Background(), tt.spec)
			if err == nil {
				sb.Close(context.Background())
				t.Fatal("Start succeeded")
			}
			if sandbox.KindOf(err) != sandbox.ErrInvalid || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Start = %v, want ErrInvalid mentioning %q", err, tt.want)
			}
		})
	}
}

// What the engine refuses of the deployment's own configuration is not the
// task's fault: it is ErrUnavailable (the task is retried, not rejected),
// and the message names the problem.
func TestStartDeploymentProblems(t *testing.T) {
	_, shimPath, _ := denv.Setup(t)
	t.Run("bind source missing on the engine's host", func(t *testing.T) {
		// The shim binary was there when the provider was made and is
		// gone by the time a sandbox starts (as when wrench runs in a
		// container whose data dir the engine cannot see).
		shimCopy := filepath.Join(t.TempDir(), "wrench")
		data, err := os.ReadFile(shimPath)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(shimCopy, data, 0o755); err != nil {
			t.Fatal(err)
		}
		f := newFixture(t, func(c *docker.Config) { c.ShimPath = shimCopy })
		if err := os.Remove(shimCopy); err != nil {
			t.Fatal(err)
		}
		_, err = f.p.Start(context.Background(), sandbox.Spec{})
		if sandbox.KindOf(err) != sandbox.ErrUnavailable {
			t.Fatalf("Start = %v (kind %q), want %q", err, sandbox.KindOf(err), sandbox.ErrUnavailable)
		}
		for _, want := range []string{"bind source path does not exist", "deployment problem", shimCopy} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
	})
	t.Run("runtime not installed", func(t *testing.T) {
		f := newFixture(t, func(c *docker.Config) { c.Runtime = "no-such-runtime" })
		_, err := f.p.Start(context.Background(), sandbox.Spec{})
		if sandbox.KindOf(err) != sandbox.ErrUnavailable || !strings.Contains(err.Error(), `runtime "no-such-runtime" is not installed`) {
			t.Fatalf("Start = %v (kind %q), want %q naming the runtime", err, sandbox.KindOf(err), sandbox.ErrUnavailable)
		}
	})
}

func TestStartImageMissing(t *testing.T) {
	f := newFixture(t, nil)
	_, err := f.p.Start(context.Background(), sandbox.Spec{Image: "wrench-no-such-image:v0"})
	if sandbox.KindOf(err) != sandbox.ErrImageMissing {
		t.Fatalf("Start = %v, want ErrImageMissing", err)
	}
	for _, want := range []string{"wrench-no-such-image:v0", "wrench image build"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// A shim that never says hello fails Start, and the container created for
// it is removed.
func TestStartFailureLeavesNothing(t *testing.T) {
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("needs a static busybox as a shim that exits at once")
	}
	f := newFixture(t, func(c *docker.Config) { c.ShimPath = busybox })
	_, err = f.p.Start(context.Background(), sandbox.Spec{})
	if sandbox.KindOf(err) != sandbox.ErrUnavailable || !strings.Contains(err.Error(), "shim did not start") {
		t.Fatalf("Start = %v, want ErrUnavailable explaining the shim", err)
	}
	if !strings.Contains(err.Error(), "applet not found") {
		t.Errorf("error %q lacks the shim's stderr", err)
	}
	if left := dockertest.Containers(t, f.cli, f.deployment); len(left) != 0 {
		t.Errorf("containers left: %v", left)
	}
}

func TestEngineUnreachable(t *testing.T) {
	cli, err := client.NewClientWithOpts(client.WithHost("unix:///nonexistent/docker.sock"), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	shimPath, err := exec.LookPath("go") // any executable will do: Start fails before using it
	if err != nil {
		t.Skip("needs an executable to stand in for the shim")
	}
	p, err := docker.New(context.Background(), docker.Config{Engine: docker.NewEngine(cli), ShimPath: shimPath, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("New without an engine: %v", err)
	}
	if err := p.Ping(context.Background()); sandbox.KindOf(err) != sandbox.ErrUnavailable {
		t.Errorf("Ping = %v, want ErrUnavailable", err)
	}
	if _, err := p.Start(context.Background(), sandbox.Spec{}); sandbox.KindOf(err) != sandbox.ErrUnavailable {
		t.Errorf("Start = %v, want ErrUnavailable", err)
	}
}

// TestEngineHandleUnreachable: FromEnv makes a client though the engine
// the environment names is not there, and every call of the engine handle
// then fails as unavailable (the version and info with the client's own
// error, which the doctor quotes).
func TestEngineHandleUnreachable(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	eng, err := docker.FromEnv()
	if err != nil {
		t.Fatalf("FromEnv without an engine: %v", err)
	}
	defer eng.Close()
	ctx := context.Background()
	_, _, inspectErr := eng.InspectImage(ctx, "wrench-test:x")
	_, imagesErr := eng.Images(ctx)
	_, listErr := eng.Containers(ctx, sandbox.LabelManaged+"=true")
	for name, err := range map[string]error{
		"Ping":                eng.Ping(ctx),
		"InspectImage":        inspectErr,
		"Images":              imagesErr,
		"RemoveImage":         eng.RemoveImage(ctx, "wrench-test:x"),
		"RemoveImageIfUnused": eng.RemoveImageIfUnused(ctx, "wrench-test:x"),
		"Containers":          listErr,
		"RemoveContainer":     eng.RemoveContainer(ctx, "0123456789ab"),
	} {
		if sandbox.KindOf(err) != sandbox.ErrUnavailable {
			t.Errorf("%s = %v, want ErrUnavailable", name, err)
		}
	}
	if _, err := eng.Version(ctx); err == nil || !strings.Contains(err.Error(), "/nonexistent/docker.sock") {
		t.Errorf("Version = %v, want the client's error naming the socket", err)
	}
	if _, err := eng.Info(ctx); err == nil {
		t.Error("Info without an engine succeeded")
	}
}

func TestNewInvalid(t *testing.T) {
	tests := []struct {
		name string
		cfg  docker.Config
	}{
		{"root user", docker.Config{User: "0:0", ShimPath: "/bin/sh"}},
		{"root by name", docker.Config{User: "root", ShimPath: "/bin/sh"}},
		{"relative shim", docker.Config{ShimPath: "wrench"}},
		{"missing shim", docker.Config{ShimPath: "/nonexistent/wrench"}},
		{"shim not executable", docker.Config{ShimPath: "/etc/hostname"}},
		{"negative default memory", docker.Config{ShimPath: "/bin/sh", MemoryBytes: -1}},
		{"bad default image", docker.Config{ShimPath: "/bin/sh", DefaultImage: "No Such:Image"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := docker.New(context.Background(), tt.cfg)
			if sandbox.KindOf(err) != sandbox.ErrInvalid {
				t.Errorf("New = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestLifetime(t *testing.T) {
	f := newFixture(t, nil)
	sb := f.start(t, sandbox.Spec{Timeout: 2 * time.Second})
	_, err := sb.Exec(context.Background(), sandbox.ExecRequest{Command: "sleep 30"})
	if sandbox.KindOf(err) != sandbox.ErrLimit || !strings.Contains(err.Error(), "lifetime") {
		t.Fatalf("Exec past the lifetime = %v, want ErrLimit about the lifetime", err)
	}
	if _, err := sb.ReadFile(context.Background(), "x"); sandbox.KindOf(err) != sandbox.ErrLimit {
		t.Errorf("later call = %v, want ErrLimit", err)
	}
}

func TestWorkspaceWatchdog(t *testing.T) {
	f := newFixture(t, func(c *docker.Config) { c.WatchInterval = 100 * time.Millisecond })
	sb := f.start(t, sandbox.Spec{WorkspaceDir: t.TempDir(), DiskBytes: 2 << 20})
	res := run(t, sb, "head -c 1000000 /dev/zero > small && echo ok")
	if string(res.Output) != "ok\n" {
		t.Fatalf("small write: %q", res.Output)
	}
	_, err := sb.Exec(context.Background(), sandbox.ExecRequest{Command: "head -c 5000000 /dev/zero > big; sleep 30"})
	if sandbox.KindOf(err) != sandbox.ErrLimit || !strings.Contains(err.Error(), "disk use exceeded 2 MB") {
		t.Fatalf("Exec over the disk limit = %v, want ErrLimit about the workspace", err)
	}
	if _, err := sb.Stat(context.Background(), "big"); sandbox.KindOf(err) != sandbox.ErrLimit {
		t.Errorf("later call = %v, want ErrLimit", err)
	}
}

func TestContainerGone(t *testing.T) {
	f := newFixture(t, nil)
	sb := f.start(t, sandbox.Spec{})
	if err := exec.Command("docker", "rm", "-f", sb.ID()).Run(); err != nil {
		t.Skipf("docker CLI: %v", err)
	}
	_, err := sb.Exec(context.Background(), sandbox.ExecRequest{Command: "true"})
	if sandbox.KindOf(err) != sandbox.ErrGone {
		t.Fatalf("Exec on a removed container = %v, want ErrGone", err)
	}
	if err := sb.Close(context.Background()); err != nil {
		t.Errorf("Close of a removed container = %v", err)
	}
}

func TestAdopt(t *testing.T) {
	f := newFixture(t, nil)
	// The start spec's lifetime leaves room for a slow start on a loaded
	// machine (1 s did not: the lifetime could end before Adopt).
	sb := f.start(t, sandbox.Spec{Env: map[string]string{"OLD": "1"}, Timeout: 4 * time.Second})
	ad, ok := sb.(interface {
		Adopt(context.Context, sandbox.Spec) error
	})
	if !ok {
		t.Fatal("docker sandbox does not implement Adopt")
	}
	if err := ad.Adopt(context.Background(), sandbox.Spec{Env: map[string]string{"NEW": "2"}, Timeout: time.Hour}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4500 * time.Millisecond) // past the start spec's lifetime
	if res := run(t, sb, "echo ${OLD:-none} $NEW"); string(res.Output) != "none 2\n" {
		t.Errorf("env after Adopt = %q", res.Output)
	}
}

// The smallest pids limit a task may ask for (16) leaves the shim, which
// keeps OS threads in reserve, room to start and commands room to run.
func TestTightPidsLimit(t *testing.T) {
	f := newFixture(t, nil)
	sb := f.start(t, sandbox.Spec{Pids: 16})
	if res := run(t, sb, "echo ok | cat"); res.ExitCode != 0 || string(res.Output) != "ok\n" {
		t.Errorf("under pids 16: exit %d %q", res.ExitCode, res.Output)
	}
}

// TestWritableRootDiskLimit attacks the disk limit of a sandbox whose
// workspace is its own writable layer: files hidden in a directory the
// sandbox user made unreadable still count (the engine measures the layer
// as root), and no single file, sparse or not, can grow past the limit (the
// kernel refuses it, RLIMIT_FSIZE).
func TestWritableRootDiskLimit(t *testing.T) {
	f := newFixture(t, func(c *docker.Config) { c.WatchInterval = 100 * time.Millisecond })
	// The workspace comes with the sandbox, the sandbox user's.
	var tree bytes.Buffer
	tw := tar.NewWriter(&tree)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "workspace/", Mode: 0o755, Uid: 1000, Gid: 1000})
	tw.Close()
	sb := f.start(t, sandbox.Spec{WritableRoot: true, DiskBytes: 8 << 20, Tree: &tree})
	res := run(t, sb, "head -c 1000 /dev/zero > /workspace/small && echo wrote; truncate -s 100M /workspace/sparse; echo exit=$?; ls -l /workspace/sparse 2>&1 | head -1")
	if out := string(res.Output); !strings.HasPrefix(out, "wrote") || strings.Contains(out, "exit=0") || strings.Contains(out, "104857600") {
		t.Errorf("a 100 MB sparse file was allowed under an 8 MB limit (or nothing could be written): %s", out)
	}
	_, err := sb.Exec(context.Background(), sandbox.ExecRequest{Command: "mkdir /workspace/hid && for i in 1 2 3; do head -c 3000000 /dev/zero > /workspace/hid/$i; done; chmod 000 /workspace/hid; sleep 30"})
	if sandbox.KindOf(err) != sandbox.ErrLimit || !strings.Contains(err.Error(), "disk use exceeded 8 MB") {
		t.Fatalf("Exec writing 9 MB into an unreadable directory = %v, want ErrLimit about the disk", err)
	}
	// As root beside the engine, the layer is measured on the host: the
	// engine's own measure walks the whole image on fuse-overlayfs.
	if n := docker.HostMeasurements(sb); os.Geteuid() == 0 && n == 0 {
		t.Error("the disk use was measured by the engine, not on the host")
	}
}
