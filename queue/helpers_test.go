package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// waitLimit bounds waits so a bug cannot hang a test; not a speed assertion.
const waitLimit = 30 * time.Second

func startNATS(t testing.TB, dir string) *queue.Embedded {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	e, err := queue.StartEmbedded(context.Background(), queue.EmbeddedConfig{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	return e
}

func connect(t testing.TB, e *queue.Embedded, mod ...func(*queue.Config)) *queue.Conn {
	t.Helper()
	cfg := queue.Config{ConnectOptions: []nats.Option{e.ConnectOption()}}
	for _, m := range mod {
		m(&cfg)
	}
	c, err := queue.Connect(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func newTask(id string) task.Task {
	return task.Task{ID: id, Repo: task.Repo{URL: "https://example.com/r.git"}, Instruction: "fix it"}
}

func submit(t testing.TB, c *queue.Conn, tk task.Task) task.Status {
	t.Helper()
	st, dup, err := c.Submit(context.Background(), tk)
	if err != nil || dup {
		t.Fatalf("submit %s: dup=%v err=%v", tk.ID, dup, err)
	}
	return st
}

// streamMsgs is how many messages a stream holds.
func streamMsgs(t testing.TB, c *queue.Conn, name string) uint64 {
	t.Helper()
	s, err := c.JetStream().Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
