package queue_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
	st := resolve(t, c, tk)
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

// TestResultEventWaitsForStream: a result event published while the event
// stream cannot take it (here: gone, as while it is being placed) is
// published again until the stream is back, and stored once however often
// it is published (its Nats-Msg-Id). Published once, best effort, it was
// lost: a follower then never saw the task end.
func TestResultEventWaitsForStream(t *testing.T) {
	s := startNATS(t, "")
	w := newWarnings()
	c := connect(t, s, func(cfg *queue.Config) {
		cfg.Logger = slog.New(w)
		cfg.BindRetry = queue.Backoff{Min: 20 * time.Millisecond, Max: 100 * time.Millisecond}
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	tk := newTask("t-result-once")
	submit(t, c, tk)
	st := resolve(t, c, tk)
	nc, err := nats.Connect(s.ClientURL(), s.ConnectOption())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, queue.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := stream.CachedInfo().Config
	if err := js.DeleteStream(ctx, queue.EventsStream); err != nil {
		t.Fatal(err)
	}
	published := make(chan error, 1)
	go func() { published <- c.Events().Publish(ctx, queue.ResultEvent(st)) }()
	select {
	case err := <-published:
		t.Fatalf("publish without the stream returned %v; want it to wait for the stream", err)
	case <-w.first:
	}
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := <-published; err != nil {
		t.Fatalf("publish after the stream came back: %v", err)
	}
	if err := c.Events().Publish(ctx, queue.ResultEvent(st)); err != nil {
		t.Fatalf("publish again: %v", err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("event stream holds %d messages after publishing the result twice, want 1", info.State.Msgs)
	}
	if got := w.all(); !strings.Contains(strings.Join(got, "\n"), "result event not stored") {
		t.Fatalf("warnings = %q, want one saying the result event is published again", got)
	}
}
