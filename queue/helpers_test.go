package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/queue/natsserver"
	"github.com/wrenchworks/wrench/task"
)

// waitLimit bounds waits so a bug cannot hang a test; not a speed assertion.
const waitLimit = 30 * time.Second

func startNATS(t testing.TB, dir string) *natsserver.Server {
	t.Helper()
	return natstest.Start(t, natsserver.Config{DataDir: dir})
}

func connect(t testing.TB, s *natsserver.Server, mod ...func(*queue.Config)) *queue.Conn {
	t.Helper()
	return natstest.Connect(t, s, mod...)
}

func newTask(id string) task.Task {
	return task.Task{ID: id, Repo: task.Repo{URL: "https://example.com/r.git"}, Instruction: "fix it"}
}

func submit(t testing.TB, c *queue.Conn, tk task.Task) task.Status {
	t.Helper()
	st, dup, err := c.Submissions().Submit(context.Background(), tk)
	if err != nil || dup {
		t.Fatalf("submit %s: dup=%v err=%v", tk.ID, dup, err)
	}
	return st
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
