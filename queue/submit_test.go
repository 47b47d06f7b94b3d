package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

func TestSubmitQueuesOnceAndFillsID(t *testing.T) {
	s := startNATS(t, "")
	c := connect(t, s)
	st, dup, err := c.Submissions().Submit(context.Background(), task.Task{Repo: task.Repo{URL: "/src/r"}, Instruction: "do"})
	if err != nil || dup {
		t.Fatalf("submit: dup=%v err=%v", dup, err)
	}
	if st.TaskID == "" || st.State != task.StateQueued || st.CreatedAt.IsZero() || st.Task == nil || st.Task.ID != st.TaskID {
		t.Fatalf("status = %+v", st)
	}
	got, err := c.States().Status(context.Background(), st.TaskID)
	if err != nil || got.State != task.StateQueued {
		t.Fatalf("Status = %+v, %v", got, err)
	}
	if n := natstest.StreamMsgs(t, s, queue.TasksStream); n != 1 {
		t.Fatalf("task stream holds %d messages, want 1", n)
	}
}

func TestSubmitDuplicateReturnsExisting(t *testing.T) {
	s := startNATS(t, "")
	c := connect(t, s)
	first := submit(t, c, newTask("t-dup"))
	again := newTask("t-dup")
	again.Instruction = "something else"
	st, dup, err := c.Submissions().Submit(context.Background(), again)
	if err != nil || !dup {
		t.Fatalf("second submit: dup=%v err=%v", dup, err)
	}
	if st.Task.Instruction != "fix it" || !st.CreatedAt.Equal(first.CreatedAt) {
		t.Fatalf("duplicate returned %+v, want the original", st)
	}
	if n := natstest.StreamMsgs(t, s, queue.TasksStream); n != 1 {
		t.Fatalf("task stream holds %d messages, want 1", n)
	}
}

// A task recorded but not published (its submitter died in between) is
// published by a retried submit, once.
func TestSubmitRetryPublishesRecordedTask(t *testing.T) {
	s := startNATS(t, "")
	c := connect(t, s)
	ctx := context.Background()
	kv, err := natstest.JetStream(t, s).KeyValue(ctx, queue.StateBucket)
	if err != nil {
		t.Fatal(err)
	}
	tk := newTask("t-re")
	now := time.Now().UTC()
	tk.CreatedAt = now
	b, _ := json.Marshal(task.Status{TaskID: tk.ID, State: task.StateQueued, Task: &tk, CreatedAt: now, UpdatedAt: now})
	if _, err := kv.Create(ctx, "task.t-re", b); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, dup, err := c.Submissions().Submit(ctx, newTask("t-re")); err != nil || !dup {
			t.Fatalf("retry: dup=%v err=%v", dup, err)
		}
		if n := natstest.StreamMsgs(t, s, queue.TasksStream); n != 1 {
			t.Fatalf("task stream holds %d messages, want 1", n)
		}
	}
}

func TestSubmitInvalidTask(t *testing.T) {
	s := startNATS(t, "")
	c := connect(t, s)
	for _, tc := range []struct {
		name string
		tk   task.Task
	}{
		{"no repo", task.Task{Instruction: "x"}},
		{"no instruction", task.Task{Repo: task.Repo{URL: "/r"}}},
		{"bad id", task.Task{ID: "a b", Repo: task.Repo{URL: "/r"}, Instruction: "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := c.Submissions().Submit(context.Background(), tc.tk)
			var ve *task.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v, want *task.ValidationError", err)
			}
		})
	}
	if n := natstest.StreamMsgs(t, s, queue.TasksStream); n != 0 {
		t.Fatalf("task stream holds %d messages, want 0", n)
	}
}

func TestUnknownID(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	ctx := context.Background()
	for _, id := range []string{"t-nope", "", "bad id", "a.b"} {
		if _, err := c.States().Status(ctx, id); !errors.Is(err, task.ErrNotFound) {
			t.Errorf("Status(%q) err = %v, want ErrNotFound", id, err)
		}
		if _, err := c.Submissions().Cancel(ctx, id); !errors.Is(err, task.ErrNotFound) {
			t.Errorf("Cancel(%q) err = %v, want ErrNotFound", id, err)
		}
		if _, err := c.Events().Follow(ctx, id, 0); !errors.Is(err, task.ErrNotFound) {
			t.Errorf("Events(%q) err = %v, want ErrNotFound", id, err)
		}
		if _, err := c.Artifacts().Get(ctx, id, "patch.diff"); !errors.Is(err, task.ErrNotFound) {
			t.Errorf("Artifact(%q) err = %v, want ErrNotFound", id, err)
		}
	}
}

func TestCancelQueuedRemovesMessage(t *testing.T) {
	s := startNATS(t, "")
	c := connect(t, s)
	submit(t, c, newTask("t-cq"))
	st, err := c.Submissions().Cancel(context.Background(), "t-cq")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != task.StateCancelled || st.Result == nil || st.Result.Status != task.StateCancelled {
		t.Fatalf("status = %+v", st)
	}
	if n := natstest.StreamMsgs(t, s, queue.TasksStream); n != 0 {
		t.Fatalf("task stream holds %d messages, want 0", n)
	}
	again, err := c.Submissions().Cancel(context.Background(), "t-cq")
	if err != nil || again.State != task.StateCancelled || !again.UpdatedAt.Equal(st.UpdatedAt) {
		t.Fatalf("second cancel = %+v, %v; want unchanged", again, err)
	}
}

func TestCancelRunningRecordsRequest(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	ctx := context.Background()
	tk := newTask("t-cr")
	submit(t, c, tk)
	if _, _, err := c.States().Acquire(ctx, tk, queue.Claim{Attempt: 1, Worker: "w"}); err != nil {
		t.Fatal(err)
	}
	watch, cancel := context.WithCancel(ctx)
	defer cancel()
	ids, err := c.States().WatchCancels(watch)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.States().CancelRequested(ctx, "t-cr"); ok {
		t.Fatal("cancel requested before Cancel")
	}
	st, err := c.Submissions().Cancel(ctx, "t-cr")
	if err != nil || st.State != task.StateRunning {
		t.Fatalf("Cancel = %+v, %v; want still running", st, err)
	}
	if id := <-ids; id != "t-cr" {
		t.Fatalf("watch delivered %q", id)
	}
	if ok, err := c.States().CancelRequested(ctx, "t-cr"); !ok || err != nil {
		t.Fatalf("CancelRequested = %v, %v", ok, err)
	}
}

func TestQueueLag(t *testing.T) {
	s := startNATS(t, "")
	c := connect(t, s)
	ctx := context.Background()
	submit(t, c, newTask("t-l1"))
	submit(t, c, newTask("t-l2"))
	// No worker yet: no consumer, and QueueLag must not create one.
	if p, a, err := c.Work().Lag(ctx); err != nil || p != 2 || a != 0 {
		t.Fatalf("before any worker: pending %d, ack pending %d, %v", p, a, err)
	}
	if _, err := natstest.Stream(t, s, queue.TasksStream).Consumer(ctx, queue.WorkersConsumer); err == nil {
		t.Fatal("QueueLag created the workers consumer")
	}
	w := c.Work()
	if err := w.Open(ctx, queue.ConsumerConfig{AckWait: time.Minute, MaxDeliver: 5}); err != nil {
		t.Fatal(err)
	}
	if d, err := w.Next(ctx, waitLimit); err != nil || d == nil {
		t.Fatalf("next: %v, %v", d, err)
	}
	if p, a, err := c.Work().Lag(ctx); err != nil || p != 1 || a != 1 {
		t.Fatalf("one task running: pending %d, ack pending %d, %v", p, a, err)
	}
}
