package main

import (
	"context"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeWarmPool runs `wrench serve --warm 1`: the first task on a
// repository builds its environment snapshot, after which a sandbox of that
// snapshot is kept ready; the next task on the repository starts in it
// (its result says warm) and resolves, and SIGTERM leaves no container.
func TestServeWarmPool(t *testing.T) {
	requireImage(t)
	repo := gitRepo(t, "go-calc")
	data := t.TempDir()
	deployment := testDeployment("warm")
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
	for {
		if resp, err := http.Get(server + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatal("serve never became ready")
		}
		time.Sleep(100 * time.Millisecond)
	}
	script := filepath.Join(moduleRoot(t), "examples", "go-calc", "fix.yaml")
	submit := func() string {
		t.Helper()
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
		return status
	}
	if first := submit(); strings.Contains(first, `"warm": true`) {
		t.Errorf("the first task cannot have found a warm sandbox: %s", first)
	}
	for containersOf(t, deployment) == 0 {
		if ctx.Err() != nil {
			t.Fatal("no warm sandbox of the snapshot was started")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if second := submit(); !strings.Contains(second, `"warm": true`) || !strings.Contains(second, `"snapshot": "hit"`) {
		t.Errorf("the second task did not start warm from the snapshot: %s", second)
	}

	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	serve.Wait()
	if n := containersOf(t, deployment); n != 0 {
		t.Errorf("%d containers left after SIGTERM", n)
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
