package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// demoStub stands in for the wrench binary in scripts/demo.sh: serve says
// it listens on 127.0.0.1:45999 when asked for port 0 (as the real one
// reports the port it got), the client commands succeed, and every
// invocation is logged.
const demoStub = `#!/usr/bin/env bash
echo "$*" >> "$STUB_LOG"
case "$1" in
serve)
  for ((i = 1; i <= $#; i++)); do
    if [ "${!i}" = --http ]; then j=$((i + 1)); addr=${!j}; fi
  done
  [ "${addr##*:}" = 0 ] && addr=127.0.0.1:45999
  echo "wrench serve: API on http://$addr (embedded NATS, 2 slots)" >&2
  trap 'exit 0' TERM
  while sleep 0.1; do :; done ;;
result)
  for ((i = 1; i <= $#; i++)); do
    if [ "${!i}" = --patch ]; then j=$((i + 1)); echo "stub patch" > "${!j}"; fi
  done ;;
esac
exit 0
`

func runDemo(t *testing.T, bin string, env ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(moduleRoot(t), "scripts", "demo.sh"), bin)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) } // the script and what it started
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("demo.sh: %v\n%s", err, out)
	}
	return string(out), code
}

// TestDemoUsesItsOwnPort: the demo asks serve for a free port and talks
// only to the address its own server reports.
func TestDemoUsesItsOwnPort(t *testing.T) {
	dir := t.TempDir()
	stub, log := filepath.Join(dir, "wrench"), filepath.Join(dir, "calls.log")
	if err := os.WriteFile(stub, []byte(demoStub), 0o755); err != nil {
		t.Fatal(err)
	}
	out, code := runDemo(t, stub, "STUB_LOG="+log, "WRENCH_DEMO_PORT=")
	if code != 0 {
		t.Fatalf("demo with the stub: exit %d\n%s", code, out)
	}
	calls, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	clients := 0
	for _, line := range strings.Split(strings.TrimSpace(string(calls)), "\n") {
		switch cmd, _, _ := strings.Cut(line, " "); cmd {
		case "serve":
			if !strings.Contains(line, "--http 127.0.0.1:0") {
				t.Errorf("serve was not asked for a free port: %s", line)
			}
		default:
			clients++
			if !strings.Contains(line, "--server http://127.0.0.1:45999") {
				t.Errorf("a client call does not use the server's reported address: %s", line)
			}
		}
	}
	if clients < 5 { // list, then submit and result for both examples
		t.Errorf("only %d client calls:\n%s", clients, calls)
	}
}

// TestDemoFailsClearlyOnATakenPort: with WRENCH_DEMO_PORT naming a port
// another server holds, the demo stops with a message saying so and never
// submits to that server.
func TestDemoFailsClearlyOnATakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"tasks":[]}`) // looks like an idle wrench serve
	})}
	go srv.Serve(ln)
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port

	out, code := runDemo(t, wrenchBin, fmt.Sprintf("WRENCH_DEMO_PORT=%d", port))
	if code == 0 {
		t.Fatalf("demo succeeded against someone else's server:\n%s", out)
	}
	if want := fmt.Sprintf("port %d is already in use", port); !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range seen {
		if strings.HasPrefix(s, "POST") {
			t.Errorf("the demo submitted to the other server: %v", seen)
		}
	}
}
