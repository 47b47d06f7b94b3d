package queue_test

import (
	"context"
	"log/slog"
	"sync"
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

// resolve runs tk's first attempt to resolved and returns the final status.
func resolve(t testing.TB, c *queue.Conn, tk task.Task) task.Status {
	t.Helper()
	ctx := context.Background()
	l, _, err := c.States().Acquire(ctx, tk, queue.Claim{Attempt: 1, Worker: "w"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := l.Finish(ctx, task.Result{Status: task.StateResolved})
	if err != nil {
		t.Fatal(err)
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

// warnings is a slog handler that keeps the warnings logged and closes
// first when the first one arrives.
type warnings struct {
	mu    sync.Mutex
	msgs  []string
	first chan struct{}
}

func newWarnings() *warnings { return &warnings{first: make(chan struct{})} }

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler           { return w }
func (w *warnings) WithGroup(string) slog.Handler                { return w }

func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool {
		msg += " " + a.String()
		return true
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.msgs) == 0 {
		close(w.first)
	}
	w.msgs = append(w.msgs, msg)
	return nil
}

func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msgs...)
}
