package telemetry

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/wrenchworks/wrench/task"
)

// TracerName is the instrumentation scope of Wrench's task spans.
const TracerName = "github.com/wrenchworks/wrench"

// Span attribute keys of Wrench's own (non-semconv) attributes.
const (
	AttrTaskID     = attribute.Key("wrench.task.id")
	AttrAttempt    = attribute.Key("wrench.task.attempt")
	AttrSource     = attribute.Key("wrench.task.source")
	AttrRepo       = attribute.Key("wrench.repo.url")
	AttrStatus     = attribute.Key("wrench.task.status")
	AttrReason     = attribute.Key("wrench.task.reason")
	AttrPhase      = attribute.Key("wrench.phase")
	AttrTurn       = attribute.Key("wrench.turn")
	AttrCostUSD    = attribute.Key("wrench.cost_usd")
	AttrWorker     = attribute.Key("wrench.worker")
	AttrToolCalls  = attribute.Key("wrench.usage.tool_calls")
	AttrTokensIn   = attribute.Key("wrench.usage.input_tokens")
	AttrTokensOut  = attribute.Key("wrench.usage.output_tokens")
	AttrTurnsTotal = attribute.Key("wrench.usage.turns")
)

// TaskTracer turns a task's event stream into spans, live (feed events as
// they happen) or post hoc (feed a recorded stream; span times come from the
// events' Time). It is safe for concurrent use.
//
// The tree of one attempt:
//
//	task                              (consumer; child of the submitter's span)
//	├── phase clone | sandbox | baseline | verify
//	└── invoke_agent wrench           (the agent phase)
//	    └── turn N
//	        ├── chat {model}          (client; gen_ai.* attributes)
//	        └── execute_tool {tool}   (internal)
type TaskTracer struct {
	tracer   trace.Tracer
	provider string
}

// TaskTracerConfig configures a [TaskTracer].
type TaskTracerConfig struct {
	// Provider is the gen_ai.provider.name of chat spans (default "openai":
	// Wrench talks to OpenAI-compatible endpoints).
	Provider string
}

// NewTaskTracer returns a TaskTracer drawing spans from tp.
func NewTaskTracer(tp trace.TracerProvider, cfg TaskTracerConfig) *TaskTracer {
	if cfg.Provider == "" {
		cfg.Provider = "openai"
	}
	return &TaskTracer{tracer: tp.Tracer(TracerName), provider: cfg.Provider}
}

// TaskSpans are the open spans of one attempt. Feed it with
// [TaskSpans.Event] and close it with [TaskSpans.End] (a result event also
// ends it); its methods are safe for concurrent use and do nothing after
// the end.
type TaskSpans struct {
	tt     *TaskTracer
	mu     sync.Mutex
	ctx    context.Context // carries the task span
	task   trace.Span
	phases []openSpan // stack: innermost last
	turn   *openSpan
	tools  []openSpan // tool calls awaiting their result, in call order
	// chatFrom is when the next model call began: the turn's start or the
	// last tool result.
	chatFrom time.Time
	ended    bool
}

type openSpan struct {
	name string
	span trace.Span
	ctx  context.Context
}

// Start opens the task span of one attempt at time at (zero: now). ctx
// carries the submitter's trace context (the queue extracts it from the
// task message's headers, queue/trace.go); the returned
// context carries the task span, for logs and child spans.
func (tt *TaskTracer) Start(ctx context.Context, t task.Task, attempt int, at time.Time) (context.Context, *TaskSpans) {
	attrs := []attribute.KeyValue{AttrTaskID.String(t.ID), AttrAttempt.Int(attempt)}
	if t.Source.Kind != "" {
		attrs = append(attrs, AttrSource.String(t.Source.Kind))
	}
	if u := task.RedactURL(t.Repo.URL); u != "" {
		attrs = append(attrs, AttrRepo.String(u))
	}
	ctx, span := tt.tracer.Start(ctx, "task", withTime(at,
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))...)
	return ctx, &TaskSpans{tt: tt, ctx: ctx, task: span, chatFrom: at}
}

// Replay builds the whole span tree of a recorded attempt: Start at the
// first event's time, every event, and End with the result event's result
// (or an unknown result when the stream has none).
func (tt *TaskTracer) Replay(ctx context.Context, t task.Task, attempt int, events []task.Event) {
	var at time.Time
	if len(events) > 0 {
		at = events[0].Time
	}
	_, s := tt.Start(ctx, t, attempt, at)
	for _, ev := range events {
		s.Event(ev)
	}
	s.End(task.Result{TaskID: t.ID}, time.Time{})
}

// Context returns the context carrying the task span.
func (s *TaskSpans) Context() context.Context { return s.ctx }

// Event advances the span tree by one event.
func (s *TaskSpans) Event(ev task.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	switch ev.Kind {
	case task.EventPhase:
		if PhaseStarting(ev) {
			s.startPhase(ev)
		} else {
			s.endPhase(ev)
		}
	case task.EventTurn:
		s.endTurn(ev.Time)
		parent := s.current()
		ctx, span := s.tt.tracer.Start(parent, "turn "+strconv.Itoa(ev.Turn),
			withTime(ev.Time, trace.WithAttributes(AttrTurn.Int(ev.Turn)))...)
		s.turn = &openSpan{name: "turn", span: span, ctx: ctx}
		s.chatFrom = ev.Time
	case task.EventUsage:
		s.chat(ev)
		s.chatFrom = ev.Time
	case task.EventToolCall:
		ctx, span := s.tt.tracer.Start(s.current(), "execute_tool "+ev.Tool, withTime(ev.Time,
			trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(ev.Tool),
				semconv.GenAIToolType("function")))...)
		s.tools = append(s.tools, openSpan{name: ev.Tool, span: span, ctx: ctx})
	case task.EventToolResult:
		s.toolResult(ev)
		s.chatFrom = ev.Time
	case task.EventCheckpoint, task.EventRollback, task.EventLimit, task.EventResume:
		trace.SpanFromContext(s.current()).AddEvent(string(ev.Kind),
			withEventTime(ev.Time, trace.WithAttributes(attribute.String("text", ev.Text)))...)
	case task.EventState:
		s.task.AddEvent("state", withEventTime(ev.Time,
			trace.WithAttributes(AttrStatus.String(string(ev.State))))...)
	case task.EventResult:
		if ev.Result != nil {
			s.end(*ev.Result, ev.Time)
		}
	}
}

// End closes every open span and then the task span, recording res; end
// is the end time (zero: now). It is idempotent.
func (s *TaskSpans) End(res task.Result, end time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.end(res, end)
}

func (s *TaskSpans) end(res task.Result, end time.Time) {
	if s.ended {
		return
	}
	s.ended = true
	for _, t := range s.tools {
		t.span.SetStatus(codes.Error, "no result")
		t.span.End(endTime(end)...)
	}
	s.tools = nil
	s.endTurn(end)
	for i := len(s.phases) - 1; i >= 0; i-- {
		s.phases[i].span.End(endTime(end)...)
	}
	s.phases = nil
	u := res.Usage
	s.task.SetAttributes(AttrTurnsTotal.Int(u.Turns), AttrToolCalls.Int(u.ToolCalls),
		AttrTokensIn.Int64(u.InputTokens), AttrTokensOut.Int64(u.OutputTokens), AttrCostUSD.Float64(u.CostUSD))
	if res.Status != "" {
		s.task.SetAttributes(AttrStatus.String(string(res.Status)))
	}
	if res.Reason != "" {
		s.task.SetAttributes(AttrReason.String(res.Reason))
	}
	if res.Worker != "" {
		s.task.SetAttributes(AttrWorker.String(res.Worker))
	}
	switch res.Status {
	case task.StateQueued:
		// Handed back: an infrastructure retry is an error of this attempt.
		if strings.HasPrefix(res.Reason, "retry") {
			s.task.SetStatus(codes.Error, res.Reason)
		}
	case task.StateFailed, task.StateTimedOut:
		s.task.SetAttributes(semconv.ErrorTypeKey.String(string(res.Status)))
		s.task.SetStatus(codes.Error, res.Reason)
	case "":
		s.task.SetStatus(codes.Error, "no result")
	}
	s.task.End(endTime(end)...)
}

// current is the context new child spans hang from: the open tool call's
// turn, the open turn, the innermost phase, or the task.
func (s *TaskSpans) current() context.Context {
	if s.turn != nil {
		return s.turn.ctx
	}
	if n := len(s.phases); n > 0 {
		return s.phases[n-1].ctx
	}
	return s.ctx
}

func (s *TaskSpans) startPhase(ev task.Event) {
	name, opts := "phase "+ev.Phase, []trace.SpanStartOption{trace.WithAttributes(AttrPhase.String(ev.Phase))}
	if ev.Phase == PhaseAgent {
		name = "invoke_agent wrench"
		opts = append(opts, trace.WithAttributes(semconv.GenAIOperationNameInvokeAgent,
			semconv.GenAIAgentName("wrench"), semconv.GenAIProviderNameKey.String(s.tt.provider)))
	}
	ctx, span := s.tt.tracer.Start(s.current(), name, withTime(ev.Time, opts...)...)
	s.phases = append(s.phases, openSpan{name: ev.Phase, span: span, ctx: ctx})
}

func (s *TaskSpans) endPhase(ev task.Event) {
	for i := len(s.phases) - 1; i >= 0; i-- {
		if s.phases[i].name != ev.Phase {
			continue
		}
		if ev.Phase == PhaseAgent {
			s.endTurn(ev.Time)
		}
		// Close anything opened inside it first.
		for j := len(s.phases) - 1; j >= i; j-- {
			p := s.phases[j].span
			if j == i && ev.IsError {
				p.SetStatus(codes.Error, "phase failed")
				p.SetAttributes(semconv.ErrorTypeKey.String(ev.Phase + "_failed"))
			}
			p.End(endTime(ev.Time)...)
		}
		s.phases = s.phases[:i]
		return
	}
	// No open phase of that name: a point event (the agent's in-loop
	// verification, say) is recorded on the current span.
	trace.SpanFromContext(s.current()).AddEvent("phase "+ev.Phase,
		withEventTime(ev.Time, trace.WithAttributes(AttrPhase.String(ev.Phase),
			attribute.String("text", strings.TrimSpace(ev.Text))))...)
}

func (s *TaskSpans) endTurn(at time.Time) {
	if s.turn == nil {
		return
	}
	s.turn.span.End(endTime(at)...)
	s.turn = nil
}

// chat records one model call as a span from chatFrom to the usage event.
func (s *TaskSpans) chat(ev task.Event) {
	model := ev.Model
	if model == "" {
		model = "unknown"
	}
	attrs := []attribute.KeyValue{semconv.GenAIOperationNameChat,
		semconv.GenAIProviderNameKey.String(s.tt.provider), semconv.GenAIRequestModel(model)}
	if u := ev.Usage; u != nil {
		attrs = append(attrs, semconv.GenAIUsageInputTokens(int(u.InputTokens)),
			semconv.GenAIUsageOutputTokens(int(u.OutputTokens)), AttrCostUSD.Float64(u.CostUSD))
	}
	start := s.chatFrom
	if start.IsZero() || start.After(ev.Time) {
		start = ev.Time
	}
	_, span := s.tt.tracer.Start(s.current(), "chat "+model, withTime(start,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))...)
	if ev.IsError {
		span.SetStatus(codes.Error, ev.Text)
		span.SetAttributes(semconv.ErrorTypeKey.String("_OTHER"))
	}
	span.End(endTime(ev.Time)...)
}

func (s *TaskSpans) toolResult(ev task.Event) {
	idx := -1
	for i, t := range s.tools {
		if t.name == ev.Tool {
			idx = i
			break
		}
	}
	var span trace.Span
	if idx < 0 {
		// A result without its call: a zero-length span still counts it.
		_, span = s.tt.tracer.Start(s.current(), "execute_tool "+ev.Tool, withTime(ev.Time,
			trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(ev.Tool),
				semconv.GenAIToolType("function")))...)
	} else {
		span = s.tools[idx].span
		s.tools = append(s.tools[:idx], s.tools[idx+1:]...)
	}
	if ev.IsError {
		span.SetStatus(codes.Error, "tool error")
		span.SetAttributes(semconv.ErrorTypeKey.String("tool_error"))
	}
	span.End(endTime(ev.Time)...)
}

func withTime(t time.Time, opts ...trace.SpanStartOption) []trace.SpanStartOption {
	if !t.IsZero() {
		opts = append(opts, trace.WithTimestamp(t))
	}
	return opts
}

func withEventTime(t time.Time, opts ...trace.EventOption) []trace.EventOption {
	if !t.IsZero() {
		opts = append(opts, trace.WithTimestamp(t))
	}
	return opts
}

func endTime(t time.Time) []trace.SpanEndOption {
	if t.IsZero() {
		return nil
	}
	return []trace.SpanEndOption{trace.WithTimestamp(t)}
}
