package hostile_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/docker"
	"github.com/wrenchworks/wrench/sandbox/docker/dockertest"
	"github.com/wrenchworks/wrench/sandbox/image"
)

var denv dockertest.Env

func TestMain(m *testing.M) {
	code := m.Run()
	denv.Cleanup()
	os.Exit(code)
}

// Limits every hostile sandbox runs under: small enough that the tests hit
// them quickly.
const (
	memLimit  = 256 << 20
	pidsLimit = 128
	diskLimit = 64 << 20
)

type battery struct {
	cli        *client.Client
	p          *docker.Provider
	deployment string
}

// newBattery returns a provider on the real engine and the default image.
func newBattery(t *testing.T) *battery {
	t.Helper()
	cli, shim, _ := denv.Setup(t)
	st, err := image.Inspect(context.Background(), docker.NewEngine(cli), image.DefaultTag)
	if err != nil || !st.Present {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but image %s is missing (wrench image build): %v", image.DefaultTag, err)
		}
		t.Skipf("image %s missing; run `wrench image build`", image.DefaultTag)
	}
	b := &battery{cli: cli, deployment: dockertest.Deployment(t)}
	b.p, err = docker.New(context.Background(), docker.Config{
		Engine:        docker.NewEngine(cli),
		ShimPath:      shim,
		DefaultImage:  image.DefaultTag,
		Deployment:    b.deployment,
		MemoryBytes:   memLimit,
		Pids:          pidsLimit,
		DiskBytes:     diskLimit,
		NanoCPUs:      1e9,
		Timeout:       5 * time.Minute,
		ExecTimeout:   time.Minute,
		WatchInterval: 500 * time.Millisecond,
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatalf("docker.New: %v", err)
	}
	t.Cleanup(func() {
		dockertest.RemoveAll(t, cli, b.deployment)
		b.p.Close()
	})
	return b
}

// start starts a sandbox for taskID with a fresh host workspace and
// registers the battery's end-of-test checks: the sandbox closes, no
// container with its task label is left, and a fresh sandbox still runs
// `echo ok`.
func (b *battery) start(t *testing.T, taskID string) sandbox.Sandbox {
	t.Helper()
	sb, err := b.p.Start(context.Background(), sandbox.Spec{TaskID: taskID, WorkspaceDir: t.TempDir()})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if err := sb.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		if left := b.containersOf(t, taskID); len(left) != 0 {
			t.Errorf("%d container(s) with task %s left after Close", len(left), taskID)
		}
		fresh, err := b.p.Start(ctx, sandbox.Spec{TaskID: taskID + "-after", WorkspaceDir: t.TempDir()})
		if err != nil {
			t.Fatalf("provider cannot start a fresh sandbox: %v", err)
		}
		defer fresh.Close(ctx)
		res, err := fresh.Exec(ctx, sandbox.ExecRequest{Command: "echo ok"})
		if err != nil || res.ExitCode != 0 || string(res.Output) != "ok\n" {
			t.Errorf("fresh sandbox: echo ok = %q exit %d, %v", res.Output, res.ExitCode, err)
		}
	})
	return sb
}

func (b *battery) containersOf(t *testing.T, taskID string) []container.Summary {
	t.Helper()
	list, err := b.cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", sandbox.LabelDeployment+"="+b.deployment),
		filters.Arg("label", sandbox.LabelTask+"="+taskID),
	)})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	return list
}

func run(t *testing.T, sb sandbox.Sandbox, req sandbox.ExecRequest) sandbox.ExecResult {
	t.Helper()
	res, err := sb.Exec(context.Background(), req)
	if err != nil {
		t.Fatalf("Exec %q: %v", req.Command, err)
	}
	return res
}

func TestForkBomb(t *testing.T) {
	b := newBattery(t)
	sb := b.start(t, "hostile-forkbomb")
	// Every process waits for its children, so the tree stays up until the
	// pids limit stops it; the shim's pids guard (or the timeout) then
	// kills its process group. The shim shares the limit and must survive.
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Command: `bomb() { bomb | bomb & wait; }; bomb`, Timeout: 50 * time.Second})
	if err != nil {
		t.Fatalf("fork bomb: Exec = %v; want a result (the sandbox must survive)", err)
	}
	out := string(res.Output)
	t.Logf("fork bomb: exit %d, timed out %v, took %s, output tail %q", res.ExitCode, res.TimedOut, res.Duration, tail(res.Output))
	if res.ExitCode == 0 {
		t.Errorf("fork bomb exited 0")
	}
	if !res.TimedOut && !strings.Contains(out, "process limit") {
		t.Errorf("fork bomb neither timed out nor was stopped by the pids guard: %q", tail(res.Output))
	}
	if !strings.Contains(out, "fork: ") && !strings.Contains(out, "process limit") {
		t.Errorf("output does not say the processes ran out: %q", tail(res.Output))
	}
	after, err := sb.Exec(context.Background(), sandbox.ExecRequest{Command: "echo ok", Timeout: 30 * time.Second})
	if err != nil || string(after.Output) != "ok\n" {
		t.Errorf("sandbox unusable after the fork bomb: %q %v", after.Output, err)
	}
	// The limit that held is the one we asked for.
	insp, err := b.cli.ContainerInspect(context.Background(), sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	if insp.HostConfig.PidsLimit == nil || *insp.HostConfig.PidsLimit != pidsLimit {
		t.Errorf("pids limit = %v, want %d", insp.HostConfig.PidsLimit, pidsLimit)
	}
}

func TestMemoryBalloon(t *testing.T) {
	b := newBattery(t)
	sb := b.start(t, "hostile-balloon")
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{
		Command: `python3 -c '
chunks = []
while True:
    chunks.append(bytearray(32 << 20))  # zero-filled: really committed
'`,
		Timeout: 30 * time.Second,
	})
	if err == nil && res.ExitCode == 0 {
		t.Fatalf("balloon past %d MB exited 0: %q", memLimit>>20, tail(res.Output))
	}
	if err == nil && res.TimedOut {
		t.Errorf("balloon ran until the timeout instead of being stopped by the memory limit")
	}
	t.Logf("balloon: exit %d, output %q, err %v", res.ExitCode, tail(res.Output), err)
}

func TestHugeStdout(t *testing.T) {
	b := newBattery(t)
	sb := b.start(t, "hostile-stdout")
	const total = 300_000_000
	const keep = 64 << 10
	res := run(t, sb, sandbox.ExecRequest{Command: "head -c 300000000 /dev/zero | tr '\\0' a", MaxOutput: keep, Timeout: 50 * time.Second})
	if res.ExitCode != 0 || res.TimedOut {
		t.Fatalf("exit %d timed out %v", res.ExitCode, res.TimedOut)
	}
	if len(res.Output) > keep+1024 {
		t.Errorf("kept %d bytes, cap was %d", len(res.Output), keep)
	}
	if res.Dropped < total-int64(keep)-1024 || res.Dropped > total {
		t.Errorf("Dropped = %d, want about %d", res.Dropped, total-keep)
	}
	if !bytes.HasPrefix(res.Output, []byte("aaaa")) || !bytes.HasSuffix(res.Output, []byte("aaaa")) {
		t.Errorf("head and tail not kept: %q … %q", res.Output[:min(20, len(res.Output))], tail(res.Output))
	}
}

func TestBinaryOutput(t *testing.T) {
	b := newBattery(t)
	sb := b.start(t, "hostile-binary")
	res := run(t, sb, sandbox.ExecRequest{Command: `python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 4)'`})
	want := bytes.Repeat(func() []byte {
		b := make([]byte, 256)
		for i := range b {
			b[i] = byte(i)
		}
		return b
	}(), 4)
	if !bytes.Equal(res.Output, want) {
		t.Errorf("binary output altered: got %d bytes, want %d exact", len(res.Output), len(want))
	}
}

func TestProcessIgnoringSIGTERMOutlivesCommand(t *testing.T) {
	b := newBattery(t)
	sb := b.start(t, "hostile-sigterm")
	// A detached process in its own session that ignores SIGTERM; the
	// sleep lets it leave the command's process group before the command
	// ends.
	res := run(t, sb, sandbox.ExecRequest{
		Command: `setsid bash -c 'trap "" TERM; exec -a stubborn sleep 600' </dev/null >/dev/null 2>&1 & sleep 1; echo started`,
		Timeout: 20 * time.Second,
	})
	if res.ExitCode != 0 || res.TimedOut || !strings.Contains(string(res.Output), "started") {
		t.Fatalf("command did not return on its own: exit %d timed out %v %q", res.ExitCode, res.TimedOut, res.Output)
	}
	later := run(t, sb, sandbox.ExecRequest{Command: `grep -l '^stubborn' /proc/[0-9]*/cmdline 2>/dev/null | wc -l`})
	if strings.TrimSpace(string(later.Output)) != "1" {
		t.Errorf("the escaped process is not running after its command (%q): the test did not test anything", later.Output)
	}
	// The end-of-test checks close the sandbox, with the stubborn process
	// in it, and require the container gone.
}

func TestSleepPastTimeout(t *testing.T) {
	b := newBattery(t)
	sb := b.start(t, "hostile-timeout")
	res := run(t, sb, sandbox.ExecRequest{Command: "echo before; sleep 600; echo after", Timeout: 2 * time.Second})
	if !res.TimedOut {
		t.Errorf("TimedOut = false (exit %d)", res.ExitCode)
	}
	if !strings.Contains(string(res.Output), "before") || strings.Contains(string(res.Output), "after") {
		t.Errorf("output = %q", res.Output)
	}
	next := run(t, sb, sandbox.ExecRequest{Command: "echo next"})
	if string(next.Output) != "next\n" {
		t.Errorf("sandbox unusable after a timeout: %q", next.Output)
	}
}

func TestFillTmp(t *testing.T) {
	b := newBattery(t)
	sb := b.start(t, "hostile-filltmp")
	res := run(t, sb, sandbox.ExecRequest{Command: "head -c 200000000 /dev/zero > /tmp/big; echo rc=$?; df -k /tmp | tail -1", Timeout: 30 * time.Second})
	out := string(res.Output)
	// The tmpfs fills up (no space left), or the file reaches the
	// sandbox's file size limit first (RLIMIT_FSIZE is the disk limit).
	full := strings.Contains(out, "No space left on device") || strings.Contains(out, "File size limit exceeded")
	if !full || strings.Contains(out, "rc=0") {
		t.Errorf("writing 200 MB to a %d MB /tmp did not fail: %q", diskLimit>>20, out)
	}
	if fi, err := sb.Stat(context.Background(), "."); err != nil || !fi.IsDir {
		t.Errorf("sandbox unusable after /tmp filled: %+v %v", fi, err)
	}
}

func TestFillWorkspace(t *testing.T) {
	b := newBattery(t)
	sb := b.start(t, "hostile-fillws")
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Command: "head -c 200000000 /dev/zero > big; sleep 60", Timeout: 50 * time.Second})
	if err == nil {
		// The command may finish first; the watchdog's verdict then
		// arrives with the next call.
		_, err = sb.Exec(context.Background(), sandbox.ExecRequest{Command: "true"})
	}
	if sandbox.KindOf(err) != sandbox.ErrLimit {
		t.Errorf("filling the workspace past %d MB: result %+v, err %v; want a %q error", diskLimit>>20, res, err, sandbox.ErrLimit)
	}
}

func TestOnlyLoopback(t *testing.T) {
	b := newBattery(t)
	sb := b.start(t, "hostile-net")
	res := run(t, sb, sandbox.ExecRequest{Command: "ls /sys/class/net; tail -n +3 /proc/net/dev | cut -d: -f1"})
	got := strings.Fields(string(res.Output))
	for _, iface := range got {
		if iface != "lo" {
			t.Errorf("interface %q visible; want only lo (all: %v)", iface, got)
		}
	}
	if len(got) == 0 {
		t.Errorf("no interfaces listed: %q", res.Output)
	}
}

func TestSecretsInvisible(t *testing.T) {
	const secret = "sk-secret-test"
	t.Setenv("WRENCH_LLM_API_KEY", secret)
	b := newBattery(t)
	sb := b.start(t, "hostile-secrets")
	res := run(t, sb, sandbox.ExecRequest{Command: `env; for f in /proc/[0-9]*/environ; do echo "== $f"; tr '\0' '\n' < "$f"; done 2>&1; grep -rs "` + secret + `" /proc/[0-9]*/cmdline /etc /home /tmp /workspace; echo done`})
	if bytes.Contains(res.Output, []byte(secret)) {
		t.Errorf("the worker's secret is visible inside the sandbox:\n%s", res.Output)
	}
	if !strings.Contains(string(res.Output), "done") || !strings.Contains(string(res.Output), "== /proc/1/environ") {
		t.Errorf("probe did not run: %q", tail(res.Output))
	}
}

func TestNoDockerSocket(t *testing.T) {
	b := newBattery(t)
	sb := b.start(t, "hostile-socket")
	res := run(t, sb, sandbox.ExecRequest{
		Command: `find / \( -path /proc -o -path /sys \) -prune -o \( -type s -o -name '*.sock' \) -print 2>/dev/null | sed 's/^/found: /'
for s in /var/run/docker.sock /run/docker.sock /run/containerd/containerd.sock; do test -e "$s" && echo "found: $s"; done
echo "DOCKER_HOST=$DOCKER_HOST"; echo done`,
		Timeout: 50 * time.Second,
	})
	out := string(res.Output)
	if !strings.Contains(out, "done") || !strings.Contains(out, "DOCKER_HOST=\n") {
		t.Fatalf("probe did not run cleanly: %q", tail(res.Output))
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "found: ") {
			t.Errorf("socket reachable inside the sandbox: %s", strings.TrimPrefix(line, "found: "))
		}
	}
}

func TestNotRoot(t *testing.T) {
	b := newBattery(t)
	sb := b.start(t, "hostile-root")
	res := run(t, sb, sandbox.ExecRequest{Command: `id -u; id -g; grep -E '^(CapEff|CapPrm|NoNewPrivs)' /proc/self/status; touch /etc/owned 2>&1; chown 0 /workspace 2>&1; su -c id 2>&1 </dev/null; echo done`})
	out := string(res.Output)
	lines := strings.Split(out, "\n")
	if len(lines) < 2 || lines[0] != "1000" || lines[1] != "1000" {
		t.Errorf("runs as %q, want uid and gid 1000", lines[:min(2, len(lines))])
	}
	for _, want := range []string{"CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "NoNewPrivs:\t1", "Read-only file system", "Operation not permitted"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func tail(b []byte) []byte {
	if len(b) > 200 {
		return b[len(b)-200:]
	}
	return b
}
