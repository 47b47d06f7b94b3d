package pool_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/docker"
	"github.com/wrenchworks/wrench/sandbox/docker/dockertest"
	"github.com/wrenchworks/wrench/sandbox/pool"
)

var denv dockertest.Env

func TestMain(m *testing.M) {
	code := m.Run()
	denv.Cleanup()
	os.Exit(code)
}

func newDockerProvider(t testing.TB) (*docker.Provider, string, string) {
	t.Helper()
	cli, shimPath, image := denv.Setup(t)
	deployment := dockertest.Deployment(t)
	prov, err := docker.New(context.Background(), docker.Config{Engine: docker.NewEngine(cli), ShimPath: shimPath, DefaultImage: image, Deployment: deployment, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if left := dockertest.Containers(t, cli, deployment); len(left) > 0 {
			t.Errorf("%d containers left behind", len(left))
			dockertest.RemoveAll(t, cli, deployment)
		}
		prov.Close()
	})
	return prov, image, deployment
}

func TestDockerPool(t *testing.T) {
	prov, image, _ := newDockerProvider(t)
	tmpl := sandbox.Spec{Image: image, MemoryBytes: 512 << 20}
	p, err := pool.New(prov, pool.Config{Size: 2, Template: tmpl, Dir: t.TempDir(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "2 ready", func() bool { return p.Stats().Ready == 2 })

	spec := tmpl
	spec.TaskID, spec.Env = "task-1", map[string]string{"TASK": "one"}
	lease, err := p.Acquire(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if !lease.Warm {
		t.Fatal("not warm")
	}
	// The caller fills the workspace after acquiring (here: one file).
	if err := os.WriteFile(filepath.Join(lease.WorkspaceDir, "in.txt"), []byte("from host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := lease.Sandbox.Exec(context.Background(), sandbox.ExecRequest{Command: "cat in.txt; echo $TASK > out.txt"})
	if err != nil || string(res.Output) != "from host\n" {
		t.Fatalf("Exec = %q, %v", res.Output, err)
	}
	if data, err := os.ReadFile(filepath.Join(lease.WorkspaceDir, "out.txt")); err != nil || string(data) != "one\n" {
		t.Errorf("host reads %q, %v", data, err)
	}
	eventually(t, "refill", func() bool { return p.Stats().Ready == 2 })
	if err := lease.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// newDockerProvider's cleanup checks no container is left.
}

// BenchmarkPoolAcquire: task-to-sandbox-ready with a warm pool (one Acquire
// of a ready sandbox, env and lifetime applied, liveness checked). Target:
// p50 ≤ 100 ms.
func BenchmarkPoolAcquire(b *testing.B) {
	prov, image, _ := newDockerProvider(b)
	tmpl := sandbox.Spec{Image: image}
	p, err := pool.New(prov, pool.Config{Size: 1, Template: tmpl, Dir: b.TempDir(), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(context.Background())
	spec := tmpl
	spec.TaskID, spec.Env = "bench", map[string]string{"K": "v"}
	for b.Loop() {
		b.StopTimer()
		waitReady(b, p)
		b.StartTimer()
		lease, err := p.Acquire(context.Background(), spec)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if !lease.Warm {
			b.Fatal("cold lease")
		}
		lease.Release(context.Background())
		b.StartTimer()
	}
}

func waitReady(b *testing.B, p *pool.Pool) {
	deadline := time.Now().Add(time.Minute)
	for p.Stats().Ready == 0 {
		if time.Now().After(deadline) {
			b.Fatalf("pool not refilled: %+v", p.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
