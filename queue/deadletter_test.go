package queue_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// A delivery that is never acked runs out of deliveries; the server's
// advisory is captured in the dead-letter stream, and BuryExhausted moves the
// task there with a failed result naming the reason.
func TestMaxDeliveriesAdvisoryIsCapturedAndBuried(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	ctx := context.Background()
	cons, err := c.TaskConsumer(ctx, queue.ConsumerConfig{AckWait: 300 * time.Millisecond, MaxDeliver: 2})
	if err != nil {
		t.Fatal(err)
	}
	adv, err := c.DeadLetterAdvisories(ctx)
	if err != nil {
		t.Fatal(err)
	}
	submit(t, c, newTask("t-dead"))
	for want := uint64(1); want <= 2; want++ {
		m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatalf("delivery %d: %v", want, err)
		}
		md, _ := m.Metadata()
		if md.NumDelivered != want {
			t.Fatalf("delivery count = %d, want %d", md.NumDelivered, want)
		}
		// No ack: the worker "died".
	}
	// The server notices the exhausted message when it next looks for one
	// to deliver, i.e. on the next pull (workers always have one waiting).
	if _, err := cons.Next(jetstream.FetchMaxWait(time.Second)); err == nil {
		t.Fatal("a third delivery was made")
	}
	am, err := adv.Next(jetstream.FetchMaxWait(waitLimit))
	if err != nil {
		t.Fatalf("no max-deliveries advisory captured: %v", err)
	}
	a, err := queue.ParseDeliveryExceeded(am.Data())
	if err != nil {
		t.Fatal(err)
	}
	if a.Stream != queue.TasksStream || a.Consumer != queue.WorkersConsumer || a.Deliveries != 2 || a.StreamSeq == 0 {
		t.Fatalf("advisory = %+v", a)
	}
	// The exhausted message stays in the work-queue stream until deleted.
	if n := streamMsgs(t, c, queue.TasksStream); n != 1 {
		t.Fatalf("task stream holds %d messages before burial, want 1", n)
	}
	b, err := c.BuryExhausted(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if b.TaskID != "t-dead" || !b.Settled || !strings.Contains(b.Reason, "deliveries exhausted (2)") {
		t.Fatalf("buried = %+v", b)
	}
	st, _ := c.Status(ctx, "t-dead")
	if st.State != task.StateFailed || st.Result == nil || st.Result.Reason != b.Reason {
		t.Fatalf("status = %+v", st)
	}
	if n := streamMsgs(t, c, queue.TasksStream); n != 0 {
		t.Fatalf("task stream holds %d messages, want 0", n)
	}
	dl, err := c.DeadLetters().GetLastMsgForSubject(ctx, queue.DeadLetterSubjectPrefix+"t-dead")
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
	if b2, err := c.BuryExhausted(ctx, a); err != nil || b2.TaskID != "" {
		t.Fatalf("second bury = %+v, %v", b2, err)
	}
}
