package queue_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue"
)

func TestSubmitCarriesTraceContext(t *testing.T) {
	s := startNATS(t, "")
	c := connect(t, s, func(cfg *queue.Config) { cfg.Propagator = propagation.TraceContext{} })
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:     trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
		TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	if _, _, err := c.Submissions().Submit(ctx, newTask("t-trace")); err != nil {
		t.Fatal(err)
	}
	m, err := natstest.Stream(t, s, queue.TasksStream).GetLastMsgForSubject(context.Background(), queue.TaskSubjectPrefix+"t-trace")
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get("traceparent") == "" {
		t.Fatalf("no traceparent header: %v", m.Header)
	}
	w := c.Work()
	if err := w.Open(ctx, queue.ConsumerConfig{AckWait: time.Minute, MaxDeliver: 5}); err != nil {
		t.Fatal(err)
	}
	d, err := w.Next(ctx, waitLimit)
	if err != nil || d == nil {
		t.Fatalf("next: %v, %v", d, err)
	}
	got := trace.SpanContextFromContext(d.Trace(context.Background()))
	if got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || !got.IsRemote() {
		t.Fatalf("extracted %+v, want trace %s span %s", got, sc.TraceID(), sc.SpanID())
	}
	// Without a propagator nothing is injected or extracted.
	plain := connect(t, s)
	if _, _, err := plain.Submissions().Submit(ctx, newTask("t-plain")); err != nil {
		t.Fatal(err)
	}
	m, _ = natstest.Stream(t, s, queue.TasksStream).GetLastMsgForSubject(context.Background(), queue.TaskSubjectPrefix+"t-plain")
	if m.Header.Get("traceparent") != "" {
		t.Fatalf("traceparent injected without a propagator: %v", m.Header)
	}
}
