package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// A running record is taken over by a redelivery of its own message or
// when its holder went quiet, and refused to another message's delivery
// while its holder is alive.
func TestAcquireTakeoverOrDuplicate(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	ctx := context.Background()
	cases := []struct {
		name  string
		first queue.Claim
		wait  time.Duration
		next  queue.Claim
		dup   bool
	}{
		{"same message redelivered", queue.Claim{Attempt: 1, Worker: "w1", Message: 7, Live: time.Minute}, 0,
			queue.Claim{Attempt: 2, Worker: "w2", Message: 7, Live: time.Minute}, false},
		{"another message, live holder", queue.Claim{Attempt: 1, Worker: "w1", Message: 7, Live: time.Minute}, 0,
			queue.Claim{Attempt: 1, Worker: "w2", Message: 9, Live: time.Minute}, true},
		{"another message, quiet holder", queue.Claim{Attempt: 1, Worker: "w1", Message: 7}, 300 * time.Millisecond,
			queue.Claim{Attempt: 1, Worker: "w2", Message: 9, Live: 200 * time.Millisecond}, false},
		{"message unknown", queue.Claim{Attempt: 1, Worker: "w1", Message: 7}, 0,
			queue.Claim{Attempt: 2, Worker: "w2", Live: time.Minute}, false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tk := newTask("t-claim-" + string(rune('a'+i)))
			submit(t, c, tk)
			if _, _, err := c.States().Acquire(ctx, tk, tc.first); err != nil {
				t.Fatal(err)
			}
			time.Sleep(tc.wait)
			l, st, err := c.States().Acquire(ctx, tk, tc.next)
			if tc.dup {
				if !errors.Is(err, queue.ErrDuplicate) || l != nil || st.Worker != "w1" {
					t.Fatalf("Acquire = %v, %+v, %v; want ErrDuplicate with w1's record", l, st, err)
				}
				return
			}
			if err != nil || st.Worker != "w2" || st.Message != tc.next.Message {
				t.Fatalf("Acquire = %+v, %v; want w2 to take over", st, err)
			}
		})
	}
}

// A copy of a running task's message that runs out of deliveries is
// deleted, and the task, whose holder is alive, is not failed.
func TestExhaustedDuplicateDoesNotFailARunningTask(t *testing.T) {
	s := startNATS(t, "")
	c := connect(t, s)
	ctx := context.Background()
	w := c.Work()
	if err := w.Open(ctx, queue.ConsumerConfig{AckWait: 2 * time.Second, MaxDeliver: 1}); err != nil {
		t.Fatal(err)
	}
	tk := newTask("t-dup")
	submit(t, c, tk)
	d := nextDelivery(t, w)
	lease, _, err := c.States().Acquire(ctx, tk, queue.Claim{Attempt: d.Attempt, Worker: "w1", Message: d.StreamSeq, Live: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(tk)
	if _, err := natstest.JetStream(t, s).Publish(ctx, queue.TaskSubjectPrefix+tk.ID, data, jetstream.WithMsgID("t-dup-copy")); err != nil {
		t.Fatal(err)
	}
	cp := nextDelivery(t, w)
	if cp.StreamSeq == d.StreamSeq {
		t.Fatalf("the copy came as the same message %d", cp.StreamSeq)
	}
	// The copy is never acked: after its one delivery, the server gives up
	// on it (noticed on the next pull) while w1 keeps the task alive.
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if err := d.InProgress(); err != nil {
			t.Fatal(err)
		}
		if err := lease.Touch(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if nd, err := w.Next(ctx, 500*time.Millisecond); err != nil || nd != nil {
		t.Fatalf("another delivery: %+v, %v", nd, err)
	}
	b, err := w.BuryExhausted(ctx, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	if b.TaskID != "" || b.Settled {
		t.Fatalf("buried %+v; want the duplicate only deleted", b)
	}
	st, _ := c.States().Status(ctx, tk.ID)
	if st.State != task.StateRunning || st.Worker != "w1" {
		t.Fatalf("status = %+v, want still running by w1", st)
	}
	if _, err := lease.Finish(ctx, task.Result{Status: task.StateResolved}); err != nil {
		t.Fatal(err)
	}
}
