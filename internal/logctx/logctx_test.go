package logctx

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"
)

type key string

// keyHandler logs the context's values of keys a and b, as a handler that
// reads the context (telemetry.ContextHandler) would.
type keyHandler struct{ slog.Handler }

func (h keyHandler) Handle(ctx context.Context, r slog.Record) error {
	for _, k := range []key{"a", "b"} {
		if v, ok := ctx.Value(k).(string); ok {
			r.AddAttrs(slog.String(string(k), v))
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h keyHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return keyHandler{h.Handler.WithAttrs(as)}
}

func TestBind(t *testing.T) {
	bound, cancel := context.WithCancel(context.WithValue(context.WithValue(context.Background(), key("a"), "bound-a"), key("b"), "bound-b"))
	cancel() // only values are taken: a cancelled bound context still logs
	call := context.WithValue(context.Background(), key("a"), "call-a")
	tests := []struct {
		name string
		log  func(l *slog.Logger)
		want map[string]any
	}{
		{"no context: the bound one", func(l *slog.Logger) { l.Info("m") }, map[string]any{"a": "bound-a", "b": "bound-b"}},
		{"call context wins key by key", func(l *slog.Logger) { l.InfoContext(call, "m") }, map[string]any{"a": "call-a", "b": "bound-b"}},
		{"With keeps the binding", func(l *slog.Logger) { l.With("k", 1).Warn("m") }, map[string]any{"a": "bound-a", "k": float64(1)}},
		{"rebinding replaces", func(l *slog.Logger) {
			Bind(context.WithValue(context.Background(), key("a"), "new-a"), l).Info("m")
		}, map[string]any{"a": "new-a", "b": nil}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := Bind(bound, slog.New(keyHandler{slog.NewJSONHandler(&buf, nil)}))
			tc.log(l)
			var rec map[string]any
			if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
				t.Fatalf("not one JSON line: %v: %s", err, buf.String())
			}
			for k, v := range tc.want {
				if rec[k] != v {
					t.Errorf("%s = %v, want %v (%s)", k, rec[k], v, buf.String())
				}
			}
		})
	}
}

func TestBindTakesNoDeadline(t *testing.T) {
	bound, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-bound.Done()
	var got context.Context
	l := Bind(bound, slog.New(ctxHandler{&got}))
	l.Info("m")
	if got.Err() != nil {
		t.Errorf("a line logged without a context saw the bound context's error %v", got.Err())
	}
}

type ctxHandler struct{ got *context.Context }

func (h ctxHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h ctxHandler) Handle(ctx context.Context, _ slog.Record) error {
	*h.got = ctx
	return nil
}
func (h ctxHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h ctxHandler) WithGroup(string) slog.Handler      { return h }
