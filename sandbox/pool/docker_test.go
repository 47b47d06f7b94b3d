package pool_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

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
	prov, err := docker.New(context.Background(), docker.Config{Client: cli, ShimPath: shimPath, DefaultImage: image, Deployment: deployment, Logger: quiet})
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
