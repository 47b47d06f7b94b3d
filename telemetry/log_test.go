package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func TestLogHandlerAddsTaskAndTrace(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("t").Start(context.Background(), "s")
	defer span.End()
	ctx = WithTaskID(ctx, "t-42")

	tests := []struct {
		name string
		log  func(l *slog.Logger)
		want map[string]string
		miss []string
	}{
		{"context carries both", func(l *slog.Logger) { l.InfoContext(ctx, "hi") },
			map[string]string{"task_id": "t-42", "trace_id": span.SpanContext().TraceID().String(),
				"span_id": span.SpanContext().SpanID().String()}, nil},
		{"no context, no ids", func(l *slog.Logger) { l.Info("hi") }, nil, []string{"task_id", "trace_id"}},
		{"task_id from With is not repeated", func(l *slog.Logger) { l.With("task_id", "t-7").InfoContext(ctx, "hi") },
			map[string]string{"task_id": "t-7"}, nil},
		{"task id only", func(l *slog.Logger) { l.InfoContext(WithTaskID(context.Background(), "t-9"), "hi") },
			map[string]string{"task_id": "t-9"}, []string{"trace_id"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			tc.log(slog.New(NewLogHandler(&buf, nil)))
			if n := strings.Count(buf.String(), `"task_id"`); n > 1 {
				t.Errorf("task_id appears %d times: %s", n, buf.String())
			}
			var rec map[string]any
			if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
				t.Fatalf("not one JSON line: %v\n%s", err, buf.String())
			}
			for k, v := range tc.want {
				if rec[k] != v {
					t.Errorf("%s = %v, want %q", k, rec[k], v)
				}
			}
			for _, k := range tc.miss {
				if _, ok := rec[k]; ok {
					t.Errorf("unexpected %s", k)
				}
			}
		})
	}
}

func TestLogHandlerGroupsAndLevel(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(NewLogHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	l.InfoContext(WithTaskID(context.Background(), "t-1"), "dropped")
	if buf.Len() != 0 {
		t.Fatalf("info logged at warn level: %s", buf.String())
	}
	l.WithGroup("g").WarnContext(WithTaskID(context.Background(), "t-1"), "kept", "k", 1)
	if !strings.Contains(buf.String(), `"g":{"k":1,"task_id":"t-1"}`) {
		t.Errorf("grouped record: %s", buf.String())
	}
}
