package main

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeWarmPool runs `wrench serve --warm 1`: a sandbox is started
// before any task, a task runs in it (cloned into its directory) and
// resolves, and SIGTERM leaves no container and no pool directory.
func TestServeWarmPool(t *testing.T) {
	requireImage(t)
	repo := gitRepo(t, "go-calc")
	data := t.TempDir()
	deployment := fmt.Sprintf("test-warm-%d", time.Now().UnixNano())
	addr := warmServeAddr(t)
	server := "http://" + addr
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	serve := exec.CommandContext(ctx, wrenchBin, "serve", "--data-dir", data, "--http", addr, "--slots", "1",
		"--warm", "1", "--deployment", deployment)
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer serve.Process.Kill()

	for containersOf(t, deployment) == 0 {
		if ctx.Err() != nil {
			t.Fatal("no warm sandbox was started")
		}
		time.Sleep(200 * time.Millisecond)
	}
	script := filepath.Join(moduleRoot(t), "examples", "go-calc", "fix.yaml")
	out, stderr, code := runWrench(t, ctx, nil, "submit", "--server", server, "--repo", repo, "--task", "Fix calc.",
		"--test", "go test ./...", "--model", "scripted:"+script, "--wait")
	if code != 0 {
		t.Fatalf("submit --wait: exit %d\n%s%s", code, out, stderr)
	}
	id := strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])
	status, _, _ := runWrench(t, ctx, nil, "status", "--server", server, id, "--json")
	if !strings.Contains(status, `"resolved"`) {
		t.Fatalf("status: %s", status)
	}

	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	serve.Wait()
	if n := containersOf(t, deployment); n != 0 {
		t.Errorf("%d containers left after SIGTERM", n)
	}
	if n := entries(t, filepath.Join(data, "warm")); n != 0 {
		if m, _ := filepath.Glob(filepath.Join(data, "warm", "*", "*")); len(m) != 0 {
			t.Errorf("pool directories left: %v", m)
		}
	}
}

// warmServeAddr returns a loopback address with a free port.
func warmServeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
