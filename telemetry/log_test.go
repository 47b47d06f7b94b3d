package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

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
		{"task_id of the record is not repeated", func(l *slog.Logger) { l.InfoContext(ctx, "hi", "task_id", "t-8") },
			map[string]string{"task_id": "t-8", "trace_id": span.SpanContext().TraceID().String()}, nil},
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

// durationValuer logs as a duration through a LogValuer.
type durationValuer struct{}

func (durationValuer) LogValue() slog.Value { return slog.DurationValue(250 * time.Millisecond) }

func TestLogHandlerWritesDurationsAsDurations(t *testing.T) {
	var buf bytes.Buffer
	upper := func(_ []string, a slog.Attr) slog.Attr { // the caller's own ReplaceAttr still runs
		if a.Key == "who" {
			a.Value = slog.StringValue(strings.ToUpper(a.Value.String()))
		}
		return a
	}
	l := slog.New(NewLogHandler(&buf, &slog.HandlerOptions{ReplaceAttr: upper}))
	l.With("setup", 90*time.Second).WithGroup("g").Info("done",
		"elapsed", 1500*time.Millisecond, slog.Duration("wait", 0), "valuer", durationValuer{},
		slog.Group("inner", "took", 2*time.Hour+3*time.Minute), "who", "me", "n", int64(7))
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("not one JSON line: %v\n%s", err, buf.String())
	}
	g, _ := rec["g"].(map[string]any)
	inner, _ := g["inner"].(map[string]any)
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"With", rec["setup"], "1m30s"},
		{"in a group", g["elapsed"], "1.5s"},
		{"zero", g["wait"], "0s"},
		{"LogValuer", g["valuer"], "250ms"},
		{"nested group", inner["took"], "2h3m0s"},
		{"caller's ReplaceAttr", g["who"], "ME"},
		{"not a duration", g["n"], float64(7)},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s: got %#v, want %#v (%s)", tc.name, tc.got, tc.want, buf.String())
		}
	}
}
