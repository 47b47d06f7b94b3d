package queue_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/wrenchworks/wrench/queue"
)

func TestSubmitCarriesTraceContext(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e, func(cfg *queue.Config) { cfg.Propagator = propagation.TraceContext{} })
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:     trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
		TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	if _, _, err := c.Submit(ctx, newTask("t-trace")); err != nil {
		t.Fatal(err)
	}
	m, err := c.TaskStream().GetLastMsgForSubject(context.Background(), queue.TaskSubjectPrefix+"t-trace")
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get("traceparent") == "" {
		t.Fatalf("no traceparent header: %v", m.Header)
	}
	got := trace.SpanContextFromContext(c.ExtractTrace(context.Background(), m.Header))
	if got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || !got.IsRemote() {
		t.Fatalf("extracted %+v, want trace %s span %s", got, sc.TraceID(), sc.SpanID())
	}
	// Without a propagator nothing is injected or extracted.
	plain := connect(t, e)
	if _, _, err := plain.Submit(ctx, newTask("t-plain")); err != nil {
		t.Fatal(err)
	}
	m, _ = c.TaskStream().GetLastMsgForSubject(context.Background(), queue.TaskSubjectPrefix+"t-plain")
	if m.Header.Get("traceparent") != "" {
		t.Fatalf("traceparent injected without a propagator: %v", m.Header)
	}
}
