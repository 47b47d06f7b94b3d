package telemetry

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/codes"

	"github.com/wrenchworks/wrench/task"
)

func TestObserverLifecycle(t *testing.T) {
	rec, tp := recorder()
	m := NewMetrics(prometheus.NewRegistry())
	var logs bytes.Buffer
	o := NewObserver(m, NewTaskTracer(tp, TaskTracerConfig{}), slog.New(NewLogHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	tk := task.Task{ID: "t-1", Repo: task.Repo{URL: "/r"}}

	ctx := o.TaskStarted(context.Background(), tk, 2, time.Second)
	if TaskIDFrom(ctx) != "t-1" {
		t.Error("run context lacks the task id")
	}
	if value(m.inFlight) != 1 || value(m.redeliveries) != 1 {
		t.Errorf("in flight %v, redeliveries %v", value(m.inFlight), value(m.redeliveries))
	}
	for _, ev := range script(time.Now())[:5] { // clone, sandbox, agent start
		o.TaskEvent(ctx, ev)
	}
	o.TaskFinished(ctx, task.Result{TaskID: "t-1", Status: task.StateResolved}, time.Minute)
	o.TaskFinished(ctx, task.Result{TaskID: "t-1", Status: task.StateResolved}, time.Minute) // ends once
	if value(m.inFlight) != 0 {
		t.Errorf("in flight %v after finish", value(m.inFlight))
	}
	if value(m.sandboxStarts) != 1 {
		t.Error("events did not reach the metrics")
	}
	names := byName(rec.Ended())
	if len(names["task"]) != 1 || len(names["invoke_agent wrench"]) != 1 {
		t.Errorf("spans %v", names)
	}
	if !strings.Contains(logs.String(), `"task_id":"t-1"`) || !strings.Contains(logs.String(), `"trace_id"`) {
		t.Errorf("log lines lack ids: %s", logs.String())
	}

	// A rejected task never started: no in-flight change.
	o.TaskFinished(context.Background(), task.Result{TaskID: "t-2", Status: task.StateRejected}, 0)
	if value(m.inFlight) != 0 || value(m.finished.WithLabelValues("rejected")) != 1 {
		t.Errorf("rejection: in flight %v", value(m.inFlight))
	}

	// A retried attempt is handed back: spans end in error, in flight drops.
	ctx = o.TaskStarted(context.Background(), task.Task{ID: "t-3"}, 1, 0)
	o.TaskRequeued(ctx, "t-3", 1, "retry: engine down")
	if value(m.inFlight) != 0 || value(m.requeues.WithLabelValues("retry")) != 1 {
		t.Errorf("requeue: in flight %v", value(m.inFlight))
	}
	var root3 bool
	for _, s := range rec.Ended() {
		if v, _ := attr(s, "wrench.task.id"); v.AsString() == "t-3" {
			root3 = true
			if s.Status().Code != codes.Error {
				t.Errorf("retried attempt status %v", s.Status())
			}
		}
	}
	if !root3 {
		t.Error("requeued attempt's span not ended")
	}

	o.Slots(1, 4)
	o.ConsumerLag(3, 1)
	o.TaskDeadLettered(context.Background(), "t-4", "deliveries exhausted")
	if value(m.freeSlots) != 3 || value(m.pending) != 3 || value(m.deadLetters) != 1 {
		t.Error("slot, lag or dead-letter hooks not recorded")
	}
}

func TestObserverNilParts(t *testing.T) {
	o := NewObserver(nil, nil, nil)
	ctx := o.TaskStarted(context.Background(), task.Task{ID: "t-1"}, 1, 0)
	o.TaskEvent(ctx, task.Event{Kind: task.EventTurn})
	o.TaskFinished(ctx, task.Result{}, 0)
	o.TaskRequeued(ctx, "t-1", 1, "shutdown")
	o.Slots(0, 1)
	o.ConsumerLag(0, 0)
	o.TaskDeadLettered(ctx, "t-1", "x")
}
