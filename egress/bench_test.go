package egress_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	dockerclient "github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/wrenchworks/wrench/egress"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/docker/dockertest"
)

// downloadSize is the benchmark's download: 50 MiB.
const downloadSize = 50 << 20

// download fetches a URL with urllib (the proxy from the environment, if
// any), discards it in 1 MiB reads and prints the bytes, the seconds the
// download took (interpreter start and exec overhead left out) and the
// CPU seconds the client used for it.
const download = `import sys, time, urllib.request
t, c = time.perf_counter(), time.process_time()
n = 0
with urllib.request.urlopen(sys.argv[1], timeout=120) as r:
    while True:
        b = r.read(1 << 20)
        if not b:
            break
        n += len(b)
print(n, time.perf_counter() - t, time.process_time() - c)
`

// BenchmarkEgressDownload: a 50 MiB download from a server on the host's
// loopback by the same Python client in the same image, through the
// egress proxy from a sandbox (no network: the shim's forwarder, the
// bind-mounted unix socket, the proxy), and directly from a container on
// the host's network with the same CPU and memory limits. Each iteration
// runs both, in alternating order, so a change in the machine's load hits
// both alike. Metrics, medians over the iterations: the client's own
// throughput and the per-pair ratio (target: proxy/direct ≥ 0.8), and
// the CPU milliseconds each path spent per download (client, server, and
// for the proxy path the proxy and the shim), which do not depend on the
// machine's load.
func BenchmarkEgressDownload(b *testing.B) {
	blob := bytes.Repeat([]byte("0123456789abcdef"), downloadSize/16)
	url := "http://" + hostServer(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(blob)))
		w.Write(blob)
	})) + "/blob"
	dir := filepath.Join(b.TempDir(), "run")
	s, err := egress.Open(context.Background(), egress.SessionConfig{Dir: dir, TaskID: "bench", Phase: egress.PhaseSetup, Allow: []string{hostLoopback}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	sb := pythonSandbox(b, dir)
	if err := sb.WriteFile(context.Background(), "download.py", []byte(download), 0o644); err != nil {
		b.Fatal(err)
	}
	cli, _, _ := denv.Setup(b)
	shim := shimPID(b, cli, sb.ID())
	direct := hostNetworkContainer(b)
	viaProxy := func() sample {
		self, sh0 := selfCPU(), procCPU(shim)
		r := parseDownload(b, sh(b, sb, "python3 download.py "+url))
		r.cpu += selfCPU() - self + procCPU(shim) - sh0
		return r
	}
	viaHost := func() sample {
		self := selfCPU()
		r := parseDownload(b, direct("python3", "-c", download, url))
		r.cpu += selfCPU() - self
		return r
	}
	viaProxy() // warm up both
	viaHost()
	var proxied, directs []sample
	var ratios []float64
	for i := 0; b.Loop(); i++ {
		var p, d sample
		if i%2 == 0 {
			p, d = viaProxy(), viaHost()
		} else {
			d, p = viaHost(), viaProxy()
		}
		proxied, directs, ratios = append(proxied, p), append(directs, d), append(ratios, p.mbps/d.mbps)
	}
	b.ReportMetric(median(proxied, func(s sample) float64 { return s.mbps }), "proxy-MB/s")
	b.ReportMetric(median(directs, func(s sample) float64 { return s.mbps }), "direct-MB/s")
	b.ReportMetric(median(ratios, func(r float64) float64 { return r }), "proxy/direct")
	b.ReportMetric(median(proxied, func(s sample) float64 { return s.cpu.Seconds() * 1e3 }), "proxy-cpu-ms")
	b.ReportMetric(median(directs, func(s sample) float64 { return s.cpu.Seconds() * 1e3 }), "direct-cpu-ms")
}

// sample is one download: throughput, and CPU spent on it.
type sample struct {
	mbps float64
	cpu  time.Duration
}

func parseDownload(b *testing.B, out string) sample {
	var n int64
	var secs, cpu float64
	if _, err := fmt.Sscan(out, &n, &secs, &cpu); err != nil || n != downloadSize {
		b.Fatalf("download: %q", out)
	}
	return sample{mbps: float64(n) / secs / 1e6, cpu: time.Duration(cpu * 1e9)}
}

func median[T any](xs []T, f func(T) float64) float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	sort.Float64s(v)
	return v[len(v)/2]
}

// selfCPU is the CPU time of this process: the test server, and the proxy.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is a process's CPU time (10 ms resolution); 0 when unknown.
func procCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if pid == 0 || err != nil {
		return 0
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(f) < 14 {
		return 0
	}
	user, _ := strconv.Atoi(f[11])
	sys, _ := strconv.Atoi(f[12])
	return time.Duration(user+sys) * 10 * time.Millisecond
}

// shimPID finds the shim: the child of the container's init.
func shimPID(b *testing.B, cli *dockerclient.Client, id string) int {
	ci, err := cli.ContainerInspect(context.Background(), id)
	if err != nil {
		b.Fatal(err)
	}
	pid := ci.State.Pid
	kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if f := strings.Fields(string(kids)); err == nil && len(f) > 0 {
		pid, _ = strconv.Atoi(f[0])
	}
	return pid
}

// hostNetworkContainer starts a container of the default image on the
// host's network (as the sandbox user, with the sandbox's default CPU and
// memory limits) and returns a function that runs a command in it.
func hostNetworkContainer(b testing.TB) func(cmd ...string) string {
	b.Helper()
	cli, _, _ := denv.Setup(b)
	ctx := context.Background()
	deployment := dockertest.Deployment(b)
	created, err := cli.ContainerCreate(ctx,
		&container.Config{Image: dockertest.DefaultImage, User: sandbox.User(), Entrypoint: []string{"sleep", "infinity"},
			Labels: map[string]string{sandbox.LabelManaged: "true", sandbox.LabelDeployment: deployment}},
		&container.HostConfig{NetworkMode: "host", Resources: container.Resources{NanoCPUs: 2e9, Memory: 2 << 30}}, nil, nil, "")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { dockertest.RemoveAll(b, cli, deployment) })
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		b.Fatal(err)
	}
	return func(cmd ...string) string {
		ex, err := cli.ContainerExecCreate(ctx, created.ID, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true, Env: []string{"HOME=/tmp"}})
		if err != nil {
			b.Fatal(err)
		}
		hj, err := cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer hj.Close()
		var out, errOut strings.Builder
		stdcopy.StdCopy(&out, &errOut, hj.Reader)
		if errOut.Len() > 0 {
			b.Fatalf("%s: %s", cmd[0], errOut.String())
		}
		return out.String()
	}
}
