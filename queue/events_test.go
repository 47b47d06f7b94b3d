package queue_test

import (
	"context"
	"testing"

	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

func collect(t *testing.T, ch <-chan task.Event) []task.Event {
	t.Helper()
	var evs []task.Event
	for ev := range ch {
		evs = append(evs, ev)
	}
	return evs
}

func TestEventsReplayFollowAndClose(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	ctx := context.Background()
	tk := newTask("t-ev")
	submit(t, c, tk) // publishes the queued state event
	if err := c.Events().Publish(ctx, task.Event{TaskID: tk.ID, Kind: task.EventLog, Text: "stored"}); err != nil {
		t.Fatal(err)
	}
	ch, err := c.Events().Follow(ctx, tk.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Replay.
	for _, want := range []task.EventKind{task.EventState, task.EventLog} {
		if ev := <-ch; ev.Kind != want || ev.Seq == 0 || ev.TaskID != tk.ID {
			t.Fatalf("event = %+v, want kind %s with a seq", ev, want)
		}
	}
	// Follow.
	if err := c.Events().Publish(ctx, task.Event{TaskID: tk.ID, Kind: task.EventTurn, Turn: 1}); err != nil {
		t.Fatal(err)
	}
	if ev := <-ch; ev.Kind != task.EventTurn || ev.Turn != 1 {
		t.Fatalf("live event = %+v", ev)
	}
	l, _, err := c.States().Acquire(ctx, tk, queue.Claim{Attempt: 1, Worker: "w"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := l.Finish(ctx, task.Result{Status: task.StateResolved})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Events().Publish(ctx, queue.ResultEvent(st)); err != nil {
		t.Fatal(err)
	}
	rest := collect(t, ch)
	if len(rest) != 1 || rest[0].Kind != task.EventResult || rest[0].Result.Status != task.StateResolved {
		t.Fatalf("events after finish = %+v, want one result event then close", rest)
	}
}

func TestEventsResumeAfterSeq(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	ctx := context.Background()
	tk := newTask("t-seq")
	submit(t, c, tk)
	for i := 1; i <= 3; i++ {
		if err := c.Events().Publish(ctx, task.Event{TaskID: tk.ID, Kind: task.EventTurn, Turn: i}); err != nil {
			t.Fatal(err)
		}
	}
	st, _, err := c.States().Settle(ctx, tk.ID, nil, task.Result{Status: task.StateFailed, Reason: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Events().Publish(ctx, queue.ResultEvent(st)); err != nil {
		t.Fatal(err)
	}
	all, err := c.Events().Follow(ctx, tk.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, all)
	if len(evs) != 5 {
		t.Fatalf("got %d events, want 5: %+v", len(evs), evs)
	}
	from, err := c.Events().Follow(ctx, tk.ID, evs[2].Seq)
	if err != nil {
		t.Fatal(err)
	}
	rest := collect(t, from)
	if len(rest) != 2 || rest[0].Turn != 3 || rest[1].Kind != task.EventResult {
		t.Fatalf("resumed events = %+v", rest)
	}
}

// A final task whose result event is not stored still ends the stream with
// a result event made from its state.
func TestEventsSynthesizeMissingResult(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	ctx := context.Background()
	if _, _, err := c.States().Settle(ctx, "t-quiet", nil, task.Result{Status: task.StateRejected, Reason: "bad"}); err != nil {
		t.Fatal(err)
	}
	ch, err := c.Events().Follow(ctx, "t-quiet", 0)
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, ch)
	if len(evs) != 1 || evs[0].Kind != task.EventResult || evs[0].Result == nil || evs[0].Result.Reason != "bad" {
		t.Fatalf("events = %+v", evs)
	}
}

func TestEventsStopWithContext(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	submit(t, c, newTask("t-ctx"))
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := c.Events().Follow(ctx, "t-ctx", 0)
	if err != nil {
		t.Fatal(err)
	}
	<-ch // queued state
	cancel()
	for range ch {
	}
}
