package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/wrenchworks/wrench/task"
)

func recorder() (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	rec := tracetest.NewSpanRecorder()
	return rec, sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
}

// script is a typical attempt: clone, sandbox, agent with two turns (one
// tool call each), a verify phase, and the result.
func script(t0 time.Time) []task.Event {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	res := &task.Result{TaskID: "t-1", Status: task.StateResolved, Reason: "finished",
		Usage: task.Usage{InputTokens: 300, OutputTokens: 40, Turns: 2, ToolCalls: 2}}
	return []task.Event{
		{Kind: task.EventPhase, Phase: "clone", Text: " start", Time: at(0)},
		{Kind: task.EventPhase, Phase: "clone", Text: " end", Time: at(1)},
		{Kind: task.EventPhase, Phase: "sandbox", Text: " start", Time: at(1)},
		{Kind: task.EventPhase, Phase: "sandbox", Text: " end", Time: at(2)},
		{Kind: task.EventPhase, Phase: "agent", Text: " start", Time: at(2)},
		{Kind: task.EventTurn, Turn: 1, Time: at(2)},
		{Kind: task.EventUsage, Model: "gpt-4o", Usage: &task.Usage{InputTokens: 100, OutputTokens: 20}, Time: at(4)},
		{Kind: task.EventToolCall, Tool: "bash", Time: at(4)},
		{Kind: task.EventToolResult, Tool: "bash", IsError: true, Time: at(6)},
		{Kind: task.EventTurn, Turn: 2, Time: at(6)},
		{Kind: task.EventUsage, Model: "gpt-4o", Usage: &task.Usage{InputTokens: 200, OutputTokens: 20}, Time: at(7)},
		{Kind: task.EventToolCall, Tool: "edit", Time: at(7)},
		{Kind: task.EventToolResult, Tool: "edit", Time: at(8)},
		{Kind: task.EventPhase, Phase: "verify", Text: "finish", Time: at(8)},
		{Kind: task.EventCheckpoint, Text: "abc123", Time: at(8)},
		{Kind: task.EventPhase, Phase: "agent", Text: " end", Time: at(9)},
		{Kind: task.EventPhase, Phase: "verify", Text: " start", Time: at(9)},
		{Kind: task.EventPhase, Phase: "verify", Text: " end", Time: at(10)},
		{Kind: task.EventResult, Result: res, Time: at(10)},
	}
}

func byName(spans []sdktrace.ReadOnlySpan) map[string][]sdktrace.ReadOnlySpan {
	m := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		m[s.Name()] = append(m[s.Name()], s)
	}
	return m
}

func attr(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func TestTaskTracerTree(t *testing.T) {
	rec, tp := recorder()
	tt := NewTaskTracer(tp, TaskTracerConfig{})
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tt.Replay(context.Background(), task.Task{ID: "t-1", Repo: task.Repo{URL: "https://user:secret@example.com/r.git"}}, 1, script(t0))

	spans := rec.Ended()
	names := byName(spans)
	want := map[string]int{"task": 1, "phase clone": 1, "phase sandbox": 1, "invoke_agent wrench": 1,
		"turn 1": 1, "turn 2": 1, "chat gpt-4o": 2, "execute_tool bash": 1, "execute_tool edit": 1, "phase verify": 1}
	for n, c := range want {
		if len(names[n]) != c {
			t.Errorf("%d spans named %q, want %d", len(names[n]), n, c)
		}
	}
	if len(spans) != 11 {
		t.Errorf("%d spans, want 11", len(spans))
	}
	root := names["task"][0]
	if root.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("task span kind %v", root.SpanKind())
	}
	if v, _ := attr(root, "wrench.repo.url"); v.AsString() != "https://example.com/r.git" {
		t.Errorf("repo attribute %q leaks or lacks the URL", v.AsString())
	}
	if v, _ := attr(root, "wrench.task.status"); v.AsString() != "resolved" {
		t.Errorf("status %q", v.AsString())
	}
	if !root.StartTime().Equal(t0) || !root.EndTime().Equal(t0.Add(10*time.Second)) {
		t.Errorf("task span %v..%v, want event times", root.StartTime(), root.EndTime())
	}

	parent := func(name string) string {
		s := names[name][0]
		for _, p := range spans {
			if p.SpanContext().SpanID() == s.Parent().SpanID() {
				return p.Name()
			}
		}
		return ""
	}
	for child, want := range map[string]string{
		"phase clone": "task", "invoke_agent wrench": "task", "turn 1": "invoke_agent wrench",
		"chat gpt-4o": "turn 1", "execute_tool bash": "turn 1", "execute_tool edit": "turn 2", "phase verify": "task",
	} {
		if got := parent(child); got != want {
			t.Errorf("parent of %q = %q, want %q", child, got, want)
		}
	}

	chat := names["chat gpt-4o"][0]
	if chat.SpanKind() != trace.SpanKindClient {
		t.Errorf("chat kind %v", chat.SpanKind())
	}
	for k, v := range map[string]any{
		"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o",
		"gen_ai.usage.input_tokens": int64(100), "gen_ai.usage.output_tokens": int64(20),
	} {
		got, ok := attr(chat, k)
		if !ok || got.AsInterface() != v {
			t.Errorf("chat %s = %v, want %v", k, got.AsInterface(), v)
		}
	}
	if !chat.StartTime().Equal(t0.Add(2*time.Second)) || !chat.EndTime().Equal(t0.Add(4*time.Second)) {
		t.Errorf("chat span %v..%v, want turn start..usage", chat.StartTime(), chat.EndTime())
	}
	// The second model call of the run starts at the previous tool result.
	if c2 := names["chat gpt-4o"][1]; !c2.StartTime().Equal(t0.Add(6 * time.Second)) {
		t.Errorf("second chat starts %v", c2.StartTime())
	}

	var turn2Events []string
	for _, e := range names["turn 2"][0].Events() {
		turn2Events = append(turn2Events, e.Name)
	}
	if strings.Join(turn2Events, ",") != "phase verify,checkpoint" {
		t.Errorf("turn 2 events %v, want the in-loop verification and the checkpoint", turn2Events)
	}

	bash := names["execute_tool bash"][0]
	if v, _ := attr(bash, "gen_ai.operation.name"); v.AsString() != "execute_tool" {
		t.Errorf("tool op %q", v.AsString())
	}
	if v, _ := attr(bash, "gen_ai.tool.name"); v.AsString() != "bash" {
		t.Errorf("tool name %q", v.AsString())
	}
	if bash.Status().Code != codes.Error {
		t.Errorf("failed tool call status %v", bash.Status())
	}
	if names["execute_tool edit"][0].Status().Code == codes.Error {
		t.Error("successful tool call marked as error")
	}
}

func TestTaskTracerEndClosesOpenSpans(t *testing.T) {
	rec, tp := recorder()
	tt := NewTaskTracer(tp, TaskTracerConfig{Provider: "scripted"})
	_, s := tt.Start(context.Background(), task.Task{ID: "t-2"}, 2, time.Time{})
	s.Event(task.Event{Kind: task.EventPhase, Phase: "agent", Text: " start"})
	s.Event(task.Event{Kind: task.EventTurn, Turn: 1})
	s.Event(task.Event{Kind: task.EventToolCall, Tool: "bash"})
	s.End(task.Result{Status: task.StateFailed, Reason: "engine down"}, time.Time{})
	s.End(task.Result{}, time.Time{})                  // idempotent
	s.Event(task.Event{Kind: task.EventTurn, Turn: 2}) // ignored after the end

	if n := len(rec.Started()); n != 4 {
		t.Errorf("started %d spans, want 4", n)
	}
	if n := len(rec.Ended()); n != 4 {
		t.Fatalf("ended %d spans, want 4 (every open span closed)", n)
	}
	root := byName(rec.Ended())["task"][0]
	if root.Status().Code != codes.Error {
		t.Errorf("failed task status %v", root.Status())
	}
	if v, _ := attr(root, "wrench.task.attempt"); v.AsInt64() != 2 {
		t.Errorf("attempt %v", v.AsInt64())
	}
}

// TestTaskSpanJoinsTheSubmittersTrace: the trace context the submitter's
// span leaves in a task message's headers (queue/trace.go carries it in
// NATS headers) makes the worker's task span its child.
func TestTaskSpanJoinsTheSubmittersTrace(t *testing.T) {
	rec, tp := recorder()
	ctx, submit := tp.Tracer("test").Start(context.Background(), "POST /v1/tasks")
	h := propagation.MapCarrier{}
	Propagator().Inject(ctx, h)
	submit.End()
	if h.Get("traceparent") == "" {
		t.Fatalf("no traceparent: %v", h)
	}

	// The worker side sees only the headers.
	wctx := Propagator().Extract(context.Background(), h)
	_, s := NewTaskTracer(tp, TaskTracerConfig{}).Start(wctx, task.Task{ID: "t-3"}, 1, time.Time{})
	s.End(task.Result{Status: task.StateResolved}, time.Time{})

	root := byName(rec.Ended())["task"][0]
	if root.SpanContext().TraceID() != submit.SpanContext().TraceID() {
		t.Error("task span is not in the submitter's trace")
	}
	if root.Parent().SpanID() != submit.SpanContext().SpanID() {
		t.Error("task span's parent is not the submit span")
	}
}

func TestSetupTracing(t *testing.T) {
	ctx := context.Background()
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

	tp, shutdown, err := SetupTracing(ctx, TracingConfig{Getenv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tp.Tracer("x").Start(ctx, "s")
	if span.SpanContext().IsValid() {
		t.Error("tracing without an endpoint records spans")
	}
	if err := shutdown(ctx); err != nil {
		t.Error(err)
	}

	_, _, err = SetupTracing(ctx, TracingConfig{Getenv: env(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"})})
	if err != nil {
		t.Fatal(err)
	}

	exp := tracetest.NewInMemoryExporter()
	tp, shutdown, err = SetupTracing(ctx, TracingConfig{Exporter: exp, ServiceName: "wrench-test"})
	if err != nil {
		t.Fatal(err)
	}
	_, span = tp.Tracer("x").Start(ctx, "s")
	span.End()
	if err := tp.(*sdktrace.TracerProvider).ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	got := exp.GetSpans()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("exported %d spans, want 1", len(got))
	}
	if v, ok := got[0].Resource.Set().Value("service.name"); !ok || v.AsString() != "wrench-test" {
		t.Errorf("service.name = %v", v)
	}

	for base, want := range map[string]string{
		"http://c:4318": "http://c:4318/v1/traces", "http://c:4318/": "http://c:4318/v1/traces",
		"https://c/otlp/": "https://c/otlp/v1/traces",
	} {
		if got, err := tracesURL(base); err != nil || got != want {
			t.Errorf("tracesURL(%q) = %q, %v; want %q", base, got, err, want)
		}
	}
	if _, err := tracesURL("collector:4318"); err == nil {
		t.Error("a URL without a scheme was accepted")
	}

	// An endpoint exports over OTLP/HTTP to its /v1/traces.
	paths := make(chan string, 4)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths <- r.Method + " " + r.URL.Path + " " + r.Header.Get("Content-Type")
	}))
	defer collector.Close()
	tp, shutdown, err = SetupTracing(ctx, TracingConfig{Endpoint: collector.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, span = tp.Tracer("x").Start(ctx, "s")
	span.End()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := <-paths; got != "POST /v1/traces application/x-protobuf" {
		t.Errorf("collector got %q", got)
	}
}
