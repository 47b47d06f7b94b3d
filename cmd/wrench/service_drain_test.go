package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/dispatcher"
	"github.com/wrenchworks/wrench/task"
)

// TestServeRestartKeepsTasks stops serve (as SIGTERM does) while a task runs
// and starts it again on the same data dir: finished tasks and results are
// still there, and the interrupted task is handed back and completed.
func TestServeRestartKeepsTasks(t *testing.T) {
	dataDir := t.TempDir()
	srv := startServe(t, dataDir, "", fakeRunner(nil))
	if code, _, errOut := wrench(t, srv, "submit", "--repo", "/r", "--task", "resolve", "--id", "t-done", "--wait"); code != exitOK {
		t.Fatalf("first task: %d %s", code, errOut)
	}
	if code, _, errOut := wrench(t, srv, "submit", "--repo", "/r", "--task", "block", "--id", "t-later"); code != exitOK {
		t.Fatalf("second task: %d %s", code, errOut)
	}
	c := api.NewClient(srv.url, "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = c.Events(ctx, "t-later", 0, func(ev task.Event) error {
		if ev.Kind == task.EventTurn {
			return context.Canceled
		}
		return nil
	})
	if code := srv.shutdown(t); code != exitOK {
		t.Fatalf("serve exited %d on shutdown: %s", code, srv.stderr.String())
	}

	release := make(chan struct{})
	close(release)
	srv2 := startServe(t, dataDir, "", fakeRunner(release))
	if code, out, _ := wrench(t, srv2, "result", "t-done"); code != exitOK || out != fakePatch {
		t.Errorf("result after restart: %d %q", code, out)
	}
	if code, _, errOut := wrench(t, srv2, "watch", "t-later"); code != exitOK {
		t.Errorf("handed-back task after restart: %d %s", code, errOut)
	}
	if os.Getenv("WRENCH_TEST_LOG") != "" {
		t.Log(srv.stderr.String(), "\n----\n", srv2.stderr.String())
	}
}

// TestHandBackRedeliveredAtOnceAfterRestart: a task handed back when serve
// stops runs as soon as serve starts again on the same data dir, not after
// --ack-wait (ten minutes here; the wait below gives up after one): the
// hand-back marks the delivery expired in the consumer's stored state.
func TestHandBackRedeliveredAtOnceAfterRestart(t *testing.T) {
	dataDir := t.TempDir()
	longAck := func(f *serveFlags) { f.service.ackWait = 10 * time.Minute }
	srv := startServeWith(t, dataDir, "", fakeRunner(nil), longAck)
	if code, _, errOut := wrench(t, srv, "submit", "--repo", "/r", "--task", "block", "--id", "t-back"); code != exitOK {
		t.Fatalf("submit: %d %s", code, errOut)
	}
	c := api.NewClient(srv.url, "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = c.Events(ctx, "t-back", 0, func(ev task.Event) error {
		if ev.Kind == task.EventTurn {
			return context.Canceled // running
		}
		return nil
	})
	if code := srv.shutdown(t); code != exitOK {
		t.Fatalf("serve exited %d on shutdown: %s", code, srv.stderr.String())
	}

	release := make(chan struct{})
	close(release)
	srv2 := startServeWith(t, dataDir, "", fakeRunner(release), longAck)
	code, _, errOut := wrench(t, srv2, "watch", "t-back")
	if code != exitOK {
		t.Fatalf("handed-back task after restart: exit %d (redelivered only after --ack-wait?): %s", code, errOut)
	}
	st, err := api.NewClient(srv2.url, "").Status(context.Background(), "t-back")
	if err != nil || st.Attempt != 2 {
		t.Errorf("status %+v, %v; want attempt 2", st, err)
	}
}

// TestWorkerJoinsServe runs `wrench worker` against the NATS a serve
// exposes with --nats-listen: the two share the work queue.
func TestWorkerJoinsServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// serve's only slot is taken by a task that never ends on its own.
	hold := dispatcher.RunnerFunc(func(ctx context.Context, t task.Task, attempt int, onEvent func(task.Event)) task.Report {
		<-ctx.Done()
		return task.Report{Result: task.Result{TaskID: t.ID, Status: task.StateCancelled}}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serveErr := &syncBuffer{}
	senv := &cliEnv{stdin: strings.NewReader(""), stdout: io.Discard, stderr: serveErr, getenv: func(string) string { return "" }}
	sf := serveFlags{httpAddr: ln.Addr().String(), natsListen: "127.0.0.1:0", maxBody: api.DefaultMaxBody,
		service: serviceFlags{common: commonFlags{dataDir: t.TempDir(), logLevel: "error"}, slots: 1, verify: "finish", ackWait: time.Second}}
	serveDone := make(chan int, 1)
	go func() { serveDone <- serve(ctx, senv, sf, hold, ln) }()
	srv := &testServer{url: "http://" + ln.Addr().String()}

	var natsURL string
	for natsURL == "" {
		for _, l := range strings.Split(serveErr.String(), "\n") {
			if u, ok := strings.CutPrefix(l, "wrench serve: NATS for workers at "); ok {
				natsURL = u
			}
		}
		select {
		case code := <-serveDone:
			t.Fatalf("serve exited %d: %s", code, serveErr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}

	workerErr := &syncBuffer{}
	wenv := &cliEnv{stdin: strings.NewReader(""), stdout: io.Discard, stderr: workerErr, getenv: func(string) string { return "" }}
	wf := workerFlags{nats: natsFlags{url: natsURL, nkey: filepath.Join(sf.service.common.dataDir, "nats", "worker.nk")}, httpAddr: "127.0.0.1:0",
		service: serviceFlags{common: commonFlags{logLevel: "error"}, slots: 2, verify: "finish", ackWait: time.Second, workerID: "w-remote"}}
	workerDone := make(chan int, 1)
	go func() { workerDone <- runWorker(ctx, wenv, wf, fakeRunner(nil)) }()

	for i := range 3 {
		if code, _, errOut := wrench(t, srv, "submit", "--repo", "/r", "--task", "resolve", "--id", "t-"+string(rune('a'+i))); code != exitOK {
			t.Fatalf("submit: %d %s", code, errOut)
		}
	}
	// serve's one slot holds a task; the worker resolves the other two.
	c := api.NewClient(srv.url, "")
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	var resolved []task.Status
	for len(resolved) < 2 {
		lr, err := c.List(wctx, task.ListOptions{State: task.StateResolved})
		if err != nil {
			t.Fatalf("waiting for the worker to resolve two tasks: %v", err)
		}
		resolved = lr.Tasks
		time.Sleep(20 * time.Millisecond)
	}
	for _, st := range resolved {
		if st.Worker != "w-remote" {
			t.Errorf("%s resolved by %q, want the joined worker", st.TaskID, st.Worker)
		}
	}
	cancel()
	if code := <-workerDone; code != exitOK {
		t.Errorf("worker exit %d: %s", code, workerErr.String())
	}
	if code := <-serveDone; code != exitOK {
		t.Errorf("serve exit %d: %s", code, serveErr.String())
	}
	if !strings.Contains(workerErr.String(), "w-remote joined nats://") {
		t.Errorf("worker banner: %s", workerErr.String())
	}
}

// TestServeGraceLetsRunningTasksFinish stops serve (as SIGTERM does) with a
// task running: within --grace the task finishes and its result is kept,
// on attempt 1, instead of being handed back.
func TestServeGraceLetsRunningTasksFinish(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	release := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errOut := &syncBuffer{}
	env := &cliEnv{stdin: strings.NewReader(""), stdout: io.Discard, stderr: errOut, getenv: func(string) string { return "" }}
	f := serveFlags{httpAddr: ln.Addr().String(), maxBody: api.DefaultMaxBody,
		service: serviceFlags{common: commonFlags{dataDir: dataDir, logLevel: "error"}, slots: 1, verify: "finish",
			ackWait: time.Second, grace: time.Hour}}
	done := make(chan int, 1)
	go func() { done <- serve(ctx, env, f, fakeRunner(release), ln) }()
	srv := &testServer{url: "http://" + ln.Addr().String()}
	c := api.NewClient(srv.url, "")
	for {
		if _, err := c.List(ctx, task.ListOptions{}); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, _, e := wrench(t, srv, "submit", "--repo", "/r", "--task", "block", "--id", "t-grace"); code != exitOK {
		t.Fatalf("submit: %d %s", code, e)
	}
	_ = c.Events(ctx, "t-grace", 0, func(ev task.Event) error {
		if ev.Kind == task.EventTurn {
			return context.Canceled
		}
		return nil
	})
	cancel() // SIGTERM
	// The API still answers while the dispatcher drains.
	if st, err := c.Status(context.Background(), "t-grace"); err != nil || st.State != task.StateRunning {
		t.Errorf("during the drain: %v %+v", err, st)
	}
	close(release)
	if code := <-done; code != exitOK {
		t.Fatalf("serve exit %d: %s", code, errOut.String())
	}

	srv2 := startServe(t, dataDir, "", fakeRunner(nil))
	code, out, _ := wrench(t, srv2, "status", "--json", "t-grace")
	var st task.Status
	if code != exitOK || json.Unmarshal([]byte(out), &st) != nil || st.State != task.StateResolved || st.Attempt != 1 {
		t.Errorf("after the drain: %d %s", code, out)
	}
}

// TestFollowLiveRedraws draws the live line as a terminal would see it.
func TestFollowLiveRedraws(t *testing.T) {
	srv := startServe(t, t.TempDir(), "", fakeRunner(nil))
	code, out, e := wrench(t, srv, "submit", "--repo", "/r", "--task", "resolve", "--wait")
	if code != exitOK {
		t.Fatalf("submit: %d %s", code, e)
	}
	c := api.NewClient(srv.url, "")
	st, err := c.Status(context.Background(), strings.TrimSpace(out))
	if err != nil {
		t.Fatal(err)
	}
	var term bytes.Buffer
	if err := followLive(context.Background(), c, &term, st); err != nil {
		t.Fatal(err)
	}
	draws := strings.Split(term.String(), "\r")
	last := draws[len(draws)-1]
	if len(draws) < 3 || !strings.HasSuffix(last, "\x1b[K\n") {
		t.Fatalf("live output %q", term.String())
	}
	for _, want := range []string{"resolved", "turn 1", "bash", "1.2k tok", "$0.0021"} {
		if !strings.Contains(last, want) {
			t.Errorf("final line %q lacks %q", last, want)
		}
	}
}
