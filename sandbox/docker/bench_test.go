package docker_test

import (
	"context"
	"io"
	"log/slog"
	"os/exec"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/docker"
	"github.com/wrenchworks/wrench/sandbox/docker/dockertest"
)

// benchProvider is a provider on the test image (busybox), the same image
// the baselines run.
func benchProvider(b *testing.B) (*docker.Provider, string) {
	b.Helper()
	cli, shimPath, image := denv.Setup(b)
	deployment := dockertest.Deployment(b)
	p, err := docker.New(context.Background(), docker.Config{
		Engine: docker.NewEngine(cli), ShimPath: shimPath, DefaultImage: image, Deployment: deployment,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		dockertest.RemoveAll(b, cli, deployment)
		p.Close()
	})
	return p, image
}

// BenchmarkSandboxReady: create + start + shim hello, against `docker run
// --rm IMAGE true` (which also waits for exit and removal, but has no
// helper to wait for). Target: wrench_start ≤ 1.3× docker_run_true.
func BenchmarkSandboxReady(b *testing.B) {
	b.Run("docker_run_true", func(b *testing.B) {
		_, _, image := denv.Setup(b)
		if _, err := exec.LookPath("docker"); err != nil {
			b.Skip("no docker CLI")
		}
		for b.Loop() {
			if out, err := exec.Command("docker", "run", "--rm", image, "true").CombinedOutput(); err != nil {
				b.Fatalf("docker run: %v: %s", err, out)
			}
		}
	})
	b.Run("wrench_start", func(b *testing.B) {
		p, _ := benchProvider(b)
		ws := b.TempDir()
		for b.Loop() {
			sb, err := p.Start(context.Background(), sandbox.Spec{WorkspaceDir: ws})
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			sb.Close(context.Background())
			b.StartTimer()
		}
	})
}

// BenchmarkExec: one `true` through the shim, against `docker exec
// CONTAINER true` (CLI) and the same through the Engine API (exec create,
// attach, inspect). Target: shim ≤ 1/5 of cli_docker_exec.
func BenchmarkExec(b *testing.B) {
	ctx := context.Background()
	p, _ := benchProvider(b)
	cli, _, _ := denv.Setup(b)
	sb, err := p.Start(ctx, sandbox.Spec{WorkspaceDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close(ctx)

	b.Run("cli_docker_exec", func(b *testing.B) {
		if _, err := exec.LookPath("docker"); err != nil {
			b.Skip("no docker CLI")
		}
		exec.Command("docker", "exec", sb.ID(), "true").Run() // warm up
		for b.Loop() {
			if out, err := exec.Command("docker", "exec", sb.ID(), "true").CombinedOutput(); err != nil {
				b.Fatalf("docker exec: %v: %s", err, out)
			}
		}
	})
	b.Run("api_exec", func(b *testing.B) {
		apiExec := func() {
			created, err := cli.ContainerExecCreate(ctx, sb.ID(), container.ExecOptions{Cmd: []string{"true"}, AttachStdout: true, AttachStderr: true})
			if err != nil {
				b.Fatal(err)
			}
			hj, err := cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
			if err != nil {
				b.Fatal(err)
			}
			stdcopy.StdCopy(io.Discard, io.Discard, hj.Reader)
			hj.Close()
			st, err := cli.ContainerExecInspect(ctx, created.ID)
			if err != nil || st.ExitCode != 0 {
				b.Fatalf("exec inspect: %+v, %v", st, err)
			}
		}
		apiExec() // warm up
		for b.Loop() {
			apiExec()
		}
	})
	b.Run("shim", func(b *testing.B) {
		run := func() {
			res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "true"})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("exec: %+v, %v", res, err)
			}
		}
		run() // warm up
		for b.Loop() {
			run()
		}
	})
}
