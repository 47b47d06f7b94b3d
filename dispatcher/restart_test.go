package dispatcher_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/dispatcher"
	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// serverKind starts a NATS server process with JetStream on dir and port.
type serverKind struct {
	name  string
	start func(t *testing.T, dir string, port int) *process
}

func embeddedServerProcess(t *testing.T, dir string, port int) *process {
	return startHelper(t, "nats", "WRENCH_NATS_DIR="+dir, "WRENCH_NATS_LISTEN=127.0.0.1:"+strconv.Itoa(port))
}

// natsServerBinary runs the nats-server found on PATH (Debian's package).
func natsServerBinary(t *testing.T, dir string, port int) *process {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("nats-server not on PATH (apt-get install nats-server)")
		}
		t.Skip("nats-server not on PATH (apt-get install nats-server); the embedded-server process variant still runs")
	}
	cmd := exec.Command(bin, "-js", "-sd", dir, "-a", "127.0.0.1", "-p", strconv.Itoa(port))
	if os.Getenv("WRENCH_TEST_LOG") != "" {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	})
	waitFor(t, "nats-server to listen", func() bool {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 100*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return p
}

// Restart NATS (SIGKILL, then start again on the same store) while a task
// runs and others wait: nothing is lost, and each task gets one final result.
func TestNATSRestartMidTask(t *testing.T) {
	for _, k := range []serverKind{
		{"embedded-server-process", embeddedServerProcess},
		{"nats-server-binary", natsServerBinary},
	} {
		t.Run(k.name, func(t *testing.T) { testNATSRestart(t, k) })
	}
}

func testNATSRestart(t *testing.T, k serverKind) {
	dir, port := t.TempDir(), freePort(t)
	srv := k.start(t, dir, port)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	c, err := queue.Connect(context.Background(), queue.Config{URL: url, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	g := newGate()
	t.Cleanup(g.open)
	r := newFakeRunner()
	r.behave = func(ctx context.Context, tk task.Task, _ int, emit func(task.Event)) task.Report {
		if tk.ID == "t-r0" {
			_ = g.wait(ctx)
			emit(task.Event{Kind: task.EventLog, Text: "finishing after the restart"})
		}
		return resolved(tk)
	}
	runDispatcher(t, newDispatcher(t, c, r, dispatcher.Config{Slots: 1, WorkerID: "w", AckWait: 5 * time.Second}))
	ids := []string{"t-r0", "t-r1", "t-r2"}
	for _, id := range ids {
		submit(t, c, newTask(id))
	}
	waitState(t, c, "t-r0", task.StateRunning)

	srv.kill(t)
	g.open() // the run ends while NATS is down: storing its result must wait
	k.start(t, dir, port)

	for _, id := range ids {
		st := waitFinal(t, c, id)
		if st.State != task.StateResolved {
			t.Fatalf("%s: %+v", id, st)
		}
		if n := finalWrites(t, natstest.Dial(t, url), id); n != 1 {
			t.Fatalf("%s: %d final writes, want 1", id, n)
		}
	}
	if got := r.runs("t-r0"); len(got) != 1 {
		t.Logf("t-r0 ran %d times (redelivered during the outage); one final result regardless", len(got))
	}
	if b, err := c.Artifacts().Get(context.Background(), "t-r0", "patch.diff"); err != nil || len(b) == 0 {
		t.Fatalf("artifact after restart: %q, %v", b, err)
	}
	waitFor(t, "the work queue to drain", func() bool { return natstest.Msgs(t, natstest.Dial(t, url), queue.TasksStream) == 0 })
}
