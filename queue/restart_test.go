package queue_test

import (
	"context"
	"testing"

	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/queue/natsserver"
	"github.com/wrenchworks/wrench/task"
)

// Starting the embedded server twice on one data dir keeps every task,
// result, artifact and queued message.
func TestRestartKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	e, err := natsserver.Start(ctx, natsserver.Config{DataDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if e.ClientURL() == "" {
		t.Fatal("no client URL with a listener")
	}
	c, err := queue.Connect(ctx, queue.Config{URL: e.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	submit(t, c, newTask("t-queued"))
	done := newTask("t-done")
	submit(t, c, done)
	l, _, err := c.States().Acquire(ctx, done, queue.Claim{Attempt: 1, Worker: "w"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Artifacts().Put(ctx, done.ID, map[string][]byte{"patch.diff": []byte("p")}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Finish(ctx, task.Result{Status: task.StateResolved, Patch: "p"}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	e.Shutdown()

	e2 := startNATS(t, dir)
	if e2.ClientURL() != "" {
		t.Fatalf("in-process server has URL %q", e2.ClientURL())
	}
	c2 := connect(t, e2)
	if st, err := c2.States().Status(ctx, "t-queued"); err != nil || st.State != task.StateQueued {
		t.Fatalf("queued task after restart = %+v, %v", st, err)
	}
	if st, err := c2.States().Status(ctx, "t-done"); err != nil || st.State != task.StateResolved || st.Result.Patch != "p" {
		t.Fatalf("done task after restart = %+v, %v", st, err)
	}
	if b, err := c2.Artifacts().Get(ctx, "t-done", "patch.diff"); err != nil || string(b) != "p" {
		t.Fatalf("artifact after restart = %q, %v", b, err)
	}
	// t-done's message was never acked here, so both messages remain.
	if n := natstest.StreamMsgs(t, e2, queue.TasksStream); n != 2 {
		t.Fatalf("task stream holds %d messages, want 2", n)
	}
	if _, dup, err := c2.Submissions().Submit(ctx, newTask("t-done")); err != nil || !dup {
		t.Fatalf("resubmit after restart: dup=%v err=%v", dup, err)
	}
}
