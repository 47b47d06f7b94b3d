// Package workertest builds a real worker for tests: go-git mirrors, the
// Docker sandbox backend on the engine the environment names, environment
// snapshots, and models opened by llm.Open (scripted models included).
package workertest

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/egress"
	"github.com/wrenchworks/wrench/environment"
	"github.com/wrenchworks/wrench/llm"
	"github.com/wrenchworks/wrench/policy"
	"github.com/wrenchworks/wrench/sandbox/docker"
	"github.com/wrenchworks/wrench/sandbox/docker/dockertest"
	"github.com/wrenchworks/wrench/worker"
	"github.com/wrenchworks/wrench/workspace"
)

// Options adjust the worker New builds.
type Options struct {
	// Policy is the server policy (default: the built-in one for loopback).
	Policy *policy.Policy
	// NoEgress leaves sandboxes without the egress proxy (by default they
	// get one, trusting the host's CA bundle, see HostCABundle).
	NoEgress bool
	// Mod changes the worker's configuration before it is built.
	Mod func(*worker.Config)
}

// New returns a worker on the real engine with the product's sandbox image
// (it skips t without one, fails it under CI=true), its containers labelled
// with a deployment of their own that cleanup checks is empty, and its
// snapshots removed at the end.
func New(t testing.TB, env *dockertest.Env, o Options) *worker.Worker {
	t.Helper()
	cli, shim, _ := env.Setup(t)
	ctx := context.Background()
	if _, err := cli.ImageInspect(ctx, dockertest.DefaultImage); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and image %s is missing (make image)", dockertest.DefaultImage)
		}
		t.Skipf("image %s missing; run `make image`", dockertest.DefaultImage)
	}
	deployment := dockertest.Deployment(t)
	log := slog.New(slog.DiscardHandler)
	prov, err := docker.New(ctx, docker.Config{Engine: docker.NewEngine(cli), ShimPath: shim, DefaultImage: dockertest.DefaultImage, Deployment: deployment, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	store, err := environment.NewStore(prov, filepath.Join(data, "env"), deployment)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if left := dockertest.Containers(t, cli, deployment); len(left) > 0 {
			t.Errorf("%d containers left behind", len(left))
			dockertest.RemoveAll(t, cli, deployment)
		}
		snaps, _ := store.List(context.Background())
		for _, s := range snaps {
			prov.RemoveImage(context.Background(), s.ImageID)
		}
		prov.Close()
	})
	wsm, err := workspace.NewManager(workspace.Config{Root: filepath.Join(data, "ws"), MirrorDir: filepath.Join(data, "mirrors"), Deployment: deployment})
	if err != nil {
		t.Fatal(err)
	}
	cfg := environment.Config{Sandboxes: prov, Images: prov, Snapshots: prov, Store: store, Logger: log}
	if !o.NoEgress {
		cfg.Egress = &egress.Sessions{Dir: filepath.Join(data, "eg"), CABundle: HostCABundle(), Logger: log}
	}
	b, err := environment.NewBuilder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wcfg := worker.Config{
		Sources:      worker.MirrorSources(wsm, nil),
		Environments: b,
		Models: func(ctx context.Context, spec string) (agent.Model, string, func() error, error) {
			return llm.Open(ctx, spec, llm.OpenConfig{})
		},
		Policy: o.Policy,
	}
	if o.Mod != nil {
		o.Mod(&wcfg)
	}
	w, err := worker.New(wcfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// HostCABundle is this host's CA bundle, which sandboxes must trust when the
// host reaches the internet through a proxy that re-signs TLS (as on the
// machines these tests run on); nil when the host has none.
func HostCABundle() []byte {
	for _, p := range []string{os.Getenv("WRENCH_SANDBOX_CA"), "/etc/ssl/certs/ca-certificates.crt"} {
		if p == "" {
			continue
		}
		if b, err := os.ReadFile(p); err == nil {
			return b
		}
	}
	return nil
}
