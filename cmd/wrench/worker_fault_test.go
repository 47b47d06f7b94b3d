package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/task"
)

// engineSwitch is a unix socket in front of the real Docker engine that a
// test turns off and on: off, the socket is gone and a worker pointed at
// it (DOCKER_HOST) finds its engine unreachable.
type engineSwitch struct {
	path, target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func newEngineSwitch(t *testing.T) *engineSwitch {
	t.Helper()
	target := "/var/run/docker.sock"
	if h, ok := strings.CutPrefix(os.Getenv("DOCKER_HOST"), "unix://"); ok {
		target = h
	} else if os.Getenv("DOCKER_HOST") != "" {
		t.Skip("DOCKER_HOST is not a unix socket")
	}
	dir, err := os.MkdirTemp("", "wrench-engine-") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	s := &engineSwitch{path: filepath.Join(dir, "docker.sock"), target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() {
		s.off()
		s.wg.Wait()
		os.RemoveAll(dir)
	})
	return s
}

// on starts forwarding.
func (s *engineSwitch) on(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("unix", s.path)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() { s.forward(c) })
		}
	})
}

func (s *engineSwitch) forward(c net.Conn) {
	up, err := net.Dial("unix", s.target)
	if err != nil {
		c.Close()
		return
	}
	s.mu.Lock()
	if s.ln == nil {
		s.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	s.conns[c], s.conns[up] = true, true
	s.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	<-done
	s.mu.Lock()
	delete(s.conns, c)
	delete(s.conns, up)
	s.mu.Unlock()
}

// off stops forwarding and cuts every open connection: the engine is
// unreachable.
func (s *engineSwitch) off() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		s.ln.Close()
		s.ln = nil
	}
	for c := range s.conns {
		c.Close()
	}
}

// httpGet returns the status code and body of url.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestWorkerEngineDown: a `wrench worker` whose Docker engine goes away
// fails the task it took, finds its engine unusable, goes unready and
// hands the task over without spending a delivery; it probes on its own
// and, once the engine is back, runs the task, whose result counts the
// hand-back; the metrics blame the worker, not the task.
func TestWorkerEngineDown(t *testing.T) {
	requireImage(t)
	deployment := fmt.Sprintf("e2e-engine-%d", time.Now().UnixNano())
	t.Cleanup(func() { removeContainers(deployment) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	engine := newEngineSwitch(t)
	engine.on(t)

	_, apiURL, natsURL, natsSeed := startServeProc(t, ctx, "--slots", "0", "--data-dir", t.TempDir(), "--deployment", deployment)
	w := startProcEnv(t, "worker", []string{"DOCKER_HOST=unix://" + engine.path},
		"worker", "--nats", natsURL, "--nats-nkey", natsSeed, "--slots", "1", "--http", "127.0.0.1:0", "--data-dir", t.TempDir(),
		"--deployment", deployment, "--worker-id", "w-eng", "--log-level", "info")
	metricsURL := strings.TrimSpace(w.line(t, ctx, "wrench worker: metrics on "))
	base := strings.TrimSuffix(metricsURL, "/metrics")
	w.line(t, ctx, "wrench worker: w-eng joined ")
	waitUntil(t, ctx, "the worker to be ready", func() bool { code, _ := httpGet(t, base+"/readyz"); return code == http.StatusOK })

	engine.off()
	repo, script := helloRepo(t, 0)
	c := api.NewClient(apiURL, "")
	if _, _, err := c.Submit(ctx, helloTask("t-engine", repo, script)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "the worker to go unready", func() bool { code, _ := httpGet(t, base+"/readyz"); return code == http.StatusServiceUnavailable })
	if _, body := httpGet(t, base+"/readyz"); !strings.Contains(body, "docker engine unreachable") {
		t.Errorf("/readyz says %q, want the engine named", body)
	}
	st, err := c.Status(ctx, "t-engine")
	if err != nil || st.State != task.StateQueued || !strings.Contains(st.Reason, "worker fault") {
		t.Fatalf("while the engine is down: %+v %v; want queued for a worker fault", st, err)
	}
	if _, m := httpGet(t, metricsURL); !strings.Contains(m, `wrench_task_faults_total{blame="worker",fault="infrastructure"} 1`) ||
		!strings.Contains(m, "wrench_worker_ready 0") {
		t.Errorf("metrics while the engine is down lack the worker's fault or unreadiness:\n%s", grepLines(m, "wrench_"))
	}

	engine.on(t)
	if _, errOut, code := runWrench(t, ctx, []string{"WRENCH_SERVER=" + apiURL}, "watch", "t-engine"); code != exitOK {
		t.Fatalf("watch: exit %d: %s", code, errOut)
	}
	st, err = c.Status(ctx, "t-engine")
	if err != nil || st.State != task.StateResolved || st.Result.Attempt != 2 || st.Result.HandedBack != 1 {
		t.Fatalf("after the engine is back: %+v %v; want resolved on attempt 2 with 1 handed back", st.Result, err)
	}
	if code, _ := httpGet(t, base+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz = %d after the engine came back", code)
	}
	if _, m := httpGet(t, metricsURL); !strings.Contains(m, "wrench_worker_ready 1") ||
		!strings.Contains(m, `wrench_task_faults_total{blame="task",fault="infrastructure"} 0`) ||
		!strings.Contains(m, "wrench_dead_letters_total 0") {
		t.Errorf("metrics after recovery:\n%s", grepLines(m, "wrench_"))
	}
	if err := w.stop(t); err != nil {
		t.Errorf("worker on SIGTERM: %v", err)
	}
	if left := containersOf(t, deployment); left != 0 {
		t.Errorf("%d containers left", left)
	}
}

// waitUntil polls cond until it holds or ctx ends.
func waitUntil(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
