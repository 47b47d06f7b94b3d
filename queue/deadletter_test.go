package queue_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// A delivery that is never acked runs out of deliveries; the server's
// advisory is captured in the dead-letter stream, and BuryExhausted moves the
// task there with a failed result naming the reason.
func TestMaxDeliveriesAdvisoryIsCapturedAndBuried(t *testing.T) {
	s := startNATS(t, "")
	c := connect(t, s)
	ctx := context.Background()
	w := c.Work()
	if err := w.Open(ctx, queue.ConsumerConfig{AckWait: 300 * time.Millisecond, MaxDeliver: 2}); err != nil {
		t.Fatal(err)
	}
	submit(t, c, newTask("t-dead"))
	for want := 1; want <= 2; want++ {
		d := nextDelivery(t, w)
		if d.Attempt != want || d.TaskID != "t-dead" {
			t.Fatalf("delivery %d = %+v", want, d)
		}
		// No ack: the worker "died".
	}
	// The server notices the exhausted message when it next looks for one
	// to deliver, i.e. on the next pull (workers always have one waiting).
	if d, err := w.Next(ctx, time.Second); err != nil || d != nil {
		t.Fatalf("a third delivery: %+v, %v", d, err)
	}
	// The exhausted message stays in the work-queue stream until buried.
	if n := natstest.StreamMsgs(t, s, queue.TasksStream); n != 1 {
		t.Fatalf("task stream holds %d messages before burial, want 1", n)
	}
	// The advisory stays in the dead-letter stream; keep it to replay.
	raw := natstest.Stream(t, s, queue.DeadLetterStream)
	am, err := raw.GetLastMsgForSubject(ctx, queue.MaxDeliveriesAdvisory)
	if err != nil {
		t.Fatalf("no max-deliveries advisory captured: %v", err)
	}
	b, err := w.BuryExhausted(ctx, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	if b.TaskID != "t-dead" || !b.Settled || !strings.Contains(b.Reason, "deliveries exhausted (2)") {
		t.Fatalf("buried = %+v", b)
	}
	st, _ := c.States().Status(ctx, "t-dead")
	if st.State != task.StateFailed || st.Result == nil || st.Result.Reason != b.Reason {
		t.Fatalf("status = %+v", st)
	}
	if n := natstest.StreamMsgs(t, s, queue.TasksStream); n != 0 {
		t.Fatalf("task stream holds %d messages, want 0", n)
	}
	dl, err := raw.GetLastMsgForSubject(ctx, queue.DeadLetterSubjectPrefix+"t-dead")
	if err != nil {
		t.Fatalf("dead letter: %v", err)
	}
	if dl.Header.Get(queue.HeaderDeadReason) != b.Reason || dl.Header.Get(queue.HeaderDeadDeliveries) != "2" {
		t.Fatalf("dead letter headers = %v", dl.Header)
	}
	if tk, err := task.Decode(dl.Data); err != nil || tk.ID != "t-dead" {
		t.Fatalf("dead letter body = %q, %v", dl.Data, err)
	}
	// Handling the same advisory again changes nothing.
	if _, err := natstest.JetStream(t, s).Publish(ctx, queue.MaxDeliveriesAdvisory, am.Data); err != nil {
		t.Fatal(err)
	}
	if b2, err := w.BuryExhausted(ctx, waitLimit); err != nil || b2.TaskID != "" {
		t.Fatalf("second bury = %+v, %v", b2, err)
	}
	if st2, _ := c.States().Status(ctx, "t-dead"); st2.UpdatedAt != st.UpdatedAt {
		t.Fatalf("second bury rewrote the state: %+v", st2)
	}
}

// Term with a reason copies the message to the dead-letter stream first;
// Reissue puts it back as a fresh message (delivery count 1) and acks the
// old one; the new message carries the task's deliveries so far, the
// reissued one counted free, and a second reissue adds to them.
func TestDeliveryTermAndReissue(t *testing.T) {
	s := startNATS(t, "")
	c := connect(t, s)
	ctx := context.Background()
	w := c.Work()
	if err := w.Open(ctx, queue.ConsumerConfig{AckWait: time.Minute, MaxDeliver: 3}); err != nil {
		t.Fatal(err)
	}
	submit(t, c, newTask("t-re"))
	d := nextDelivery(t, w)
	if err := d.Nak(0); err != nil {
		t.Fatal(err)
	}
	d = nextDelivery(t, w)
	if d.Attempt != 2 {
		t.Fatalf("attempt after nak = %d", d.Attempt)
	}
	if err := d.Reissue(ctx, true); err != nil {
		t.Fatal(err)
	}
	if err := d.Reissue(ctx, true); err != nil {
		t.Fatalf("reissue again: %v", err)
	}
	d = nextDelivery(t, w)
	if d.Attempt != 1 || d.Earlier != 2 || d.Free != 1 || d.TaskID != "t-re" {
		t.Fatalf("reissued delivery = %+v, want attempt 1 after 2 earlier, 1 free", d)
	}
	if n := natstest.StreamMsgs(t, s, queue.TasksStream); n != 1 {
		t.Fatalf("task stream holds %d messages after reissue, want 1", n)
	}
	if err := d.Reissue(ctx, false); err != nil {
		t.Fatal(err)
	}
	d = nextDelivery(t, w)
	if d.Attempt != 1 || d.Earlier != 3 || d.Free != 1 {
		t.Fatalf("delivery reissued again = %+v, want attempt 1 after 3 earlier, 1 free", d)
	}
	if err := d.Term(ctx, "given up"); err != nil {
		t.Fatal(err)
	}
	dl, err := natstest.Stream(t, s, queue.DeadLetterStream).GetLastMsgForSubject(ctx, queue.DeadLetterSubjectPrefix+"t-re")
	if err != nil || dl.Header.Get(queue.HeaderDeadReason) != "given up" {
		t.Fatalf("dead letter = %+v, %v", dl, err)
	}
	if got, err := w.Next(ctx, 500*time.Millisecond); err != nil || got != nil {
		t.Fatalf("delivery after term: %+v, %v", got, err)
	}
}

// nextDelivery waits for the next delivery.
func nextDelivery(t *testing.T, w *queue.Work) *queue.Delivery {
	t.Helper()
	d, err := w.Next(context.Background(), waitLimit)
	if err != nil || d == nil {
		t.Fatalf("next delivery: %v, %v", d, err)
	}
	return d
}
