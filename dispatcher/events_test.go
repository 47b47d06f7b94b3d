package dispatcher_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/nats-io/nats.go"

	"github.com/wrenchworks/wrench/dispatcher"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

func TestRunnerEventsStateAndProgress(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	g := newGate()
	t.Cleanup(g.open)
	r := newFakeRunner()
	r.behave = func(ctx context.Context, tk task.Task, _ int, emit func(task.Event)) task.Report {
		emit(task.Event{Kind: task.EventPhase, Phase: "agent", Text: "start"})
		emit(task.Event{Kind: task.EventTurn, Turn: 1})
		emit(task.Event{Kind: task.EventToolCall, Tool: "bash", Text: `{"command":"go test ./..."}`})
		emit(task.Event{Kind: task.EventUsage, Usage: &task.Usage{InputTokens: 70, OutputTokens: 30, CostUSD: 0.01}})
		emit(task.Event{Kind: task.EventState, State: task.StateVerifying})
		_ = g.wait(ctx)
		return resolved(tk)
	}
	obs := newRecordingObserver()
	runDispatcher(t, newDispatcher(t, c, r, dispatcher.Config{Observer: obs}))
	submit(t, c, newTask("t-ev"))
	waitFor(t, "verifying state with progress", func() bool {
		st, err := c.States().Status(context.Background(), "t-ev")
		return err == nil && st.State == task.StateVerifying && st.Progress != nil &&
			st.Progress.Turn == 1 && st.Progress.LastTool == "bash" && st.Progress.Tokens == 100
	})
	g.open()
	waitFinal(t, c, "t-ev")
	var kinds []string
	for _, ev := range events(t, c, "t-ev") {
		k := string(ev.Kind)
		if ev.Kind == task.EventState {
			k += ":" + string(ev.State)
		}
		kinds = append(kinds, k)
		if ev.Seq == 0 || ev.TaskID != "t-ev" || ev.Time.IsZero() {
			t.Errorf("event without seq, task or time: %+v", ev)
		}
	}
	want := []string{"state:queued", "state:running", "phase", "turn", "tool_call", "usage", "state:verifying", "result"}
	if len(kinds) != len(want) {
		t.Fatalf("events = %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("events = %v, want %v", kinds, want)
		}
	}
	waitFor(t, "the finished hook", func() bool { return obs.count("finished:t-ev:resolved") > 0 })
	for _, k := range []string{"started:t-ev:1", "event:t-ev:usage", "finished:t-ev:resolved"} {
		if obs.count(k) != 1 {
			t.Errorf("observer saw %q %d times, want once", k, obs.count(k))
		}
	}
}

func TestObserverContextAndRequeueHooks(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	r := newFakeRunner()
	var observed atomic.Value
	r.behave = func(ctx context.Context, tk task.Task, attempt int, _ func(task.Event)) task.Report {
		observed.Store(ctx.Value(ctxKey{}))
		if attempt == 1 {
			return task.Report{Retry: true, Result: task.Result{Status: task.StateFailed, Reason: "engine down"}}
		}
		return resolved(tk)
	}
	obs := newRecordingObserver()
	runDispatcher(t, newDispatcher(t, c, r, dispatcher.Config{Observer: obs, Backoff: []time.Duration{time.Millisecond}}))
	submit(t, c, newTask("t-obs"))
	waitFinal(t, c, "t-obs")
	waitFor(t, "the finished hook", func() bool { return obs.count("finished:t-obs:resolved") > 0 })
	if v := observed.Load(); v != "observed" {
		t.Fatalf("runner ctx lacks the observer's value: %v", v)
	}
	for k, n := range map[string]int{"requeued:t-obs": 1, "started:t-obs:1": 1, "started:t-obs:2": 1, "finished:t-obs:resolved": 1} {
		if got := obs.count(k); got != n {
			t.Errorf("%s: %d calls, want %d", k, got, n)
		}
	}
	waitFor(t, "a consumer lag report", func() bool { return obs.count("lag") > 0 })
}

func TestTraceContextReachesRunner(t *testing.T) {
	e := startNATS(t, "")
	withProp := func() *queue.Conn {
		c, err := queue.Connect(context.Background(), queue.Config{
			ConnectOptions: []nats.Option{e.ConnectOption()},
			Propagator:     propagation.TraceContext{},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	submitter, worker := withProp(), withProp()
	got := make(chan trace.SpanContext, 1)
	r := newFakeRunner()
	r.behave = func(ctx context.Context, tk task.Task, _ int, _ func(task.Event)) task.Report {
		got <- trace.SpanContextFromContext(ctx)
		return resolved(tk)
	}
	runDispatcher(t, newDispatcher(t, worker, r, dispatcher.Config{}))
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9}, SpanID: trace.SpanID{7, 7, 7, 7, 7, 7, 7, 7},
		TraceFlags: trace.FlagsSampled,
	})
	if _, _, err := submitter.Submissions().Submit(trace.ContextWithSpanContext(context.Background(), sc), newTask("t-tr")); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s.TraceID() != sc.TraceID() || s.SpanID() != sc.SpanID() {
		t.Fatalf("runner span context = %v/%v, want %v/%v", s.TraceID(), s.SpanID(), sc.TraceID(), sc.SpanID())
	}
}

// A follower of the event stream stops at the first result event; it must
// find the task's stored state final then. The runner announces its result
// before the dispatcher stores it (and a retry or a shutdown may still turn
// it into a hand-back), so that announcement must not reach the stream.
func TestResultEventFollowsStoredFinalState(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	g := newGate()
	t.Cleanup(g.open)
	r := newFakeRunner()
	r.behave = func(ctx context.Context, tk task.Task, attempt int, emit func(task.Event)) task.Report {
		rep := resolved(tk)
		if attempt == 1 {
			rep = task.Report{Retry: true, Result: task.Result{Status: task.StateFailed, Reason: "engine down"}}
		}
		emit(task.Event{Kind: task.EventResult, State: rep.Result.Status, Result: &rep.Result})
		emit(task.Event{Kind: task.EventLog, Text: "after the result"})
		if attempt > 1 {
			_ = g.wait(ctx) // still finishing: the state is not final yet
		}
		return rep
	}
	obs := newRecordingObserver()
	runDispatcher(t, newDispatcher(t, c, r, dispatcher.Config{Observer: obs, Backoff: []time.Duration{time.Millisecond}}))
	submit(t, c, newTask("t-res"))

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	ch, err := c.Events().Follow(ctx, "t-res", 0)
	if err != nil {
		t.Fatal(err)
	}
	logs := 0
	var last task.Event
	for ev := range ch {
		last = ev
		if ev.Kind == task.EventLog {
			if logs++; logs == 2 {
				g.open() // the second attempt may finish now
			}
		}
		if ev.Kind == task.EventResult {
			st, err := c.States().Status(ctx, "t-res")
			if err != nil || !st.State.Final() {
				t.Fatalf("result event (%s) while the stored state is %s (%v)", ev.State, st.State, err)
			}
		}
	}
	if last.Kind != task.EventResult || last.State != task.StateResolved || logs != 2 {
		t.Fatalf("stream ended with %+v after %d log events", last, logs)
	}
	if obs.count("event:t-res:result") != 2 {
		t.Errorf("the observer saw %d runner result events, want 2 (spans end on them)", obs.count("event:t-res:result"))
	}
}
