package docker_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/docker"
	"github.com/wrenchworks/wrench/sandbox/docker/dockertest"
)

var denv dockertest.Env

func TestMain(m *testing.M) {
	code := m.Run()
	denv.Cleanup()
	os.Exit(code)
}

type fixture struct {
	cli        *client.Client
	p          *docker.Provider
	deployment string
	image      string
	shim       string
}

// newFixture returns a provider on the real engine whose containers carry
// a deployment label of their own; cleanup checks none is left.
func newFixture(t *testing.T, mod func(*docker.Config)) *fixture {
	t.Helper()
	cli, shimPath, image := denv.Setup(t)
	f := &fixture{cli: cli, deployment: dockertest.Deployment(t), image: image, shim: shimPath}
	cfg := docker.Config{
		Engine:       docker.NewEngine(cli),
		ShimPath:     shimPath,
		DefaultImage: image,
		Deployment:   f.deployment,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if mod != nil {
		mod(&cfg)
	}
	p, err := docker.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.p = p
	t.Cleanup(func() {
		if left := dockertest.Containers(t, cli, f.deployment); len(left) > 0 {
			t.Errorf("%d containers left behind", len(left))
			dockertest.RemoveAll(t, cli, f.deployment)
		}
		p.Close()
	})
	return f
}

func (f *fixture) start(t *testing.T, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	sb, err := f.p.Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	return sb
}

func run(t *testing.T, sb sandbox.Sandbox, cmd string) sandbox.ExecResult {
	t.Helper()
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Command: cmd})
	if err != nil {
		t.Fatalf("Exec(%q): %v", cmd, err)
	}
	return res
}

func TestStartExecFilesClose(t *testing.T) {
	f := newFixture(t, nil)
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "host.txt"), []byte("from host\n"), 0o644)
	sb := f.start(t, sandbox.Spec{WorkspaceDir: ws, TaskID: "t-1", Env: map[string]string{"GREETING": "hi"}})
	ctx := context.Background()

	res := run(t, sb, "echo $GREETING; pwd; cat host.txt; echo more >> host.txt")
	if string(res.Output) != "hi\n/workspace\nfrom host\n" || res.ExitCode != 0 {
		t.Errorf("exec = %d %q", res.ExitCode, res.Output)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "host.txt")); string(data) != "from host\nmore\n" {
		t.Errorf("host sees %q: the sandbox user could not write the workspace", data)
	}
	if res := run(t, sb, "exit 7"); res.ExitCode != 7 {
		t.Errorf("exit code = %d", res.ExitCode)
	}
	if err := sb.WriteFile(ctx, "/workspace/dir/new.go", []byte("package x\n// TODO\n"), 0); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(ws, "dir/new.go")); err != nil || string(data) != "package x\n// TODO\n" {
		t.Errorf("host reads %q, %v", data, err)
	}
	if m, err := sb.Grep(ctx, sandbox.GrepRequest{Pattern: "TODO", Include: "*.go"}); err != nil || len(m) != 1 || m[0].Path != "dir/new.go" || m[0].Line != 2 {
		t.Errorf("Grep = %+v, %v", m, err)
	}
	if g, err := sb.Glob(ctx, "**/*.go", ""); err != nil || len(g) != 1 || g[0] != "dir/new.go" {
		t.Errorf("Glob = %v, %v", g, err)
	}
	if _, err := sb.ReadFile(ctx, "/etc/passwd"); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("ReadFile outside = %v, want a permission error", err)
	}
	if _, err := sb.ReadFile(ctx, "missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile(missing) = %v", err)
	}

	if err := sb.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := sb.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if left := dockertest.Containers(t, f.cli, f.deployment); len(left) != 0 {
		t.Errorf("containers after Close: %v", left)
	}
	if _, err := sb.ReadFile(ctx, "host.txt"); sandbox.KindOf(err) != sandbox.ErrGone {
		t.Errorf("ReadFile after Close = %v, want ErrGone", err)
	}
}

func TestHardening(t *testing.T) {
	f := newFixture(t, nil)
	t.Setenv("WRENCH_HOST_SENTINEL", "leaked")
	sb := f.start(t, sandbox.Spec{WorkspaceDir: t.TempDir(), MemoryBytes: 256 << 20, Pids: 100, NanoCPUs: 5e8, Env: map[string]string{"TASK_VAR": "1"}})
	checks := []struct {
		name, cmd, want string
	}{
		{"non-root", "id -u; id -g", "1000\n1000\n"},
		{"no capabilities", "grep -E '^Cap(Eff|Prm|Inh|Amb):' /proc/self/status | cut -f2 | sort -u", "0000000000000000\n"},
		{"no new privileges", "grep NoNewPrivs /proc/self/status | cut -f2", "1\n"},
		{"loopback only", "ls /sys/class/net", "lo\n"},
		{"read-only root", "touch /rootfile 2>/dev/null || echo refused", "refused\n"},
		{"tmp writable and exec", "printf '#!/bin/sh\\necho ran\\n' > /tmp/x && chmod +x /tmp/x && /tmp/x", "ran\n"},
		{"home writable and exec", "cd && printf '#!/bin/sh\\necho ran\\n' > x && chmod +x x && ./x && pwd", "ran\n/home/wrench\n"},
		{"no docker socket", "ls /var/run/docker.sock /run/docker.sock 2>/dev/null || echo none", "none\n"},
		{"no host environment", "env | cut -d= -f1 | grep -v -x -E '" + allowedEnv(t, f) + "' || echo clean", "clean\n"},
		{"task env", "echo $TASK_VAR", "1\n"},
		{"shim's stream out of reach", "for d in /proc/[0-9]*; do [ \"$(cat $d/comm)\" = wrench ] && { ls $d/fd >/dev/null 2>&1 && echo open || echo denied; }; done", "denied\n"},
		{"pids limit", "cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max", "100\n"},
		{"memory limit", "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes", "268435456\n"},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			res := run(t, sb, c.cmd)
			if string(res.Output) != c.want {
				t.Errorf("%s: got %q, want %q", c.cmd, res.Output, c.want)
			}
		})
	}
	t.Run("inspect", func(t *testing.T) {
		ci, err := f.cli.ContainerInspect(context.Background(), sb.ID())
		if err != nil {
			t.Fatal(err)
		}
		hc := ci.HostConfig
		if hc.Memory != 256<<20 || hc.MemorySwap != 256<<20 || hc.NanoCPUs != 5e8 || *hc.PidsLimit != 100 {
			t.Errorf("resources = mem %d swap %d cpu %d pids %d", hc.Memory, hc.MemorySwap, hc.NanoCPUs, *hc.PidsLimit)
		}
		if !hc.ReadonlyRootfs || hc.Privileged || string(hc.NetworkMode) != "none" || hc.LogConfig.Type != "none" {
			t.Errorf("host config = %+v", hc)
		}
		for _, m := range ci.Mounts {
			if strings.Contains(m.Source, "docker.sock") {
				t.Errorf("docker socket mounted: %+v", m)
			}
		}
		labels := ci.Config.Labels
		for _, k := range []string{sandbox.LabelManaged, sandbox.LabelDeployment, sandbox.LabelCreated, sandbox.LabelOwnerPID, sandbox.LabelOwnerHost} {
			if labels[k] == "" {
				t.Errorf("label %s missing: %v", k, labels)
			}
		}
		for _, e := range ci.Config.Env {
			if strings.Contains(e, "WRENCH_HOST_SENTINEL") {
				t.Errorf("host variable in container env: %s", e)
			}
		}
	})
}

// allowedEnv is a regexp alternation of the variables a sandbox command
// may see: the image's own, the shell's, HOME and the task's.
func allowedEnv(t *testing.T, f *fixture) string {
	img, err := f.cli.ImageInspect(context.Background(), f.image)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"PATH", "HOME", "HOSTNAME", "PWD", "SHLVL", "OLDPWD", "_", "TASK_VAR"}
	if img.Config != nil {
		for _, kv := range img.Config.Env {
			name, _, _ := strings.Cut(kv, "=")
			names = append(names, name)
		}
	}
	return strings.Join(names, "|")
}

func TestBridgeNetworkOptIn(t *testing.T) {
	f := newFixture(t, nil)
	sb := f.start(t, sandbox.Spec{Network: "bridge"})
	if res := run(t, sb, "ls /sys/class/net | sort | tr '\\n' ' '"); !strings.Contains(string(res.Output), "eth0") {
		t.Errorf("interfaces with bridge = %q", res.Output)
	}
	// Without a workspace dir, /workspace is a writable tmpfs.
	if res := run(t, sb, "echo x > f && cat f"); string(res.Output) != "x\n" {
		t.Errorf("tmpfs workspace: %q", res.Output)
	}
}

func TestExecInContainer(t *testing.T) {
	f := newFixture(t, nil)
	sb := f.start(t, sandbox.Spec{WorkspaceDir: t.TempDir()})
	ctx := context.Background()

	t.Run("timeout kills the group", func(t *testing.T) {
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "sleep 100 & echo $! > /tmp/bg; sleep 100", Timeout: time.Second})
		if err != nil || !res.TimedOut {
			t.Fatalf("Exec = %+v, %v; want timed out", res, err)
		}
		if res := run(t, sb, "kill -0 $(cat /tmp/bg) 2>/dev/null && echo alive || echo gone"); string(res.Output) != "gone\n" {
			t.Errorf("background process after timeout: %q", res.Output)
		}
	})
	t.Run("output cap", func(t *testing.T) {
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "echo start; head -c 100000 /dev/zero | tr '\\0' a; echo; echo end", MaxOutput: 1000})
		if err != nil {
			t.Fatal(err)
		}
		out := string(res.Output)
		if len(out) != 1000 || !strings.HasPrefix(out, "start\naaa") || !strings.HasSuffix(out, "aaa\nend\n") || res.Dropped != 100011-1000 {
			t.Errorf("len %d dropped %d head %q tail %q", len(out), res.Dropped, out[:10], out[len(out)-10:])
		}
	})
	t.Run("binary round trip", func(t *testing.T) {
		data := make([]byte, 0, 4096)
		for i := range 4096 {
			data = append(data, byte(i*7))
		}
		if err := sb.WriteFile(ctx, "bin.dat", data, 0o600); err != nil {
			t.Fatal(err)
		}
		res := run(t, sb, "cat bin.dat")
		if !bytes.Equal(res.Output, data) {
			t.Errorf("cat returned %d bytes differing from the %d written", len(res.Output), len(data))
		}
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "cat", Stdin: data})
		if err != nil || !bytes.Equal(res.Output, data) {
			t.Errorf("stdin round trip: %d bytes, %v", len(res.Output), err)
		}
		got, err := sb.ReadFile(ctx, "bin.dat")
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("ReadFile: %d bytes, %v", len(got), err)
		}
		if fi, err := sb.Stat(ctx, "bin.dat"); err != nil || fi.Mode.Perm() != 0o600 || fi.Size != 4096 {
			t.Errorf("Stat = %+v, %v", fi, err)
		}
	})
	t.Run("duration", func(t *testing.T) {
		if res := run(t, sb, "sleep 0.2"); res.Duration < 200*time.Millisecond {
			t.Errorf("duration %v for sleep 0.2", res.Duration)
		}
	})
}

func TestConcurrentClose(t *testing.T) {
	f := newFixture(t, nil)
	sb := f.start(t, sandbox.Spec{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- sb.Close(context.Background())
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	if left := dockertest.Containers(t, f.cli, f.deployment); len(left) != 0 {
		t.Errorf("containers after Close: %v", left)
	}
}

func TestCloseWithDoneContext(t *testing.T) {
	f := newFixture(t, nil)
	sb := f.start(t, sandbox.Spec{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := sb.Close(ctx); err != nil {
		t.Fatalf("Close with a done ctx: %v", err)
	}
	if left := dockertest.Containers(t, f.cli, f.deployment); len(left) != 0 {
		t.Errorf("containers after Close: %v", left)
	}
}
