// Package logctx binds a context to a logger, so that lines logged without
// one (slog's Info, Warn, …) are handled as if logged with it. A task's
// loggers are bound to the task's context: the log handler
// (telemetry.ContextHandler) then finds the task's trace in it and every
// line of the task says trace_id, without the packages that log importing
// OpenTelemetry. It imports only the standard library.
package logctx

import (
	"context"
	"log/slog"
)

// Bind returns a logger that writes through l's handler with ctx's values:
// a record logged with a context of its own sees that context's values
// first and ctx's for the keys it lacks (so a child span in a
// *Context call wins over the bound one). Only values are taken from ctx,
// never its deadline or cancellation.
func Bind(ctx context.Context, l *slog.Logger) *slog.Logger {
	if ctx == nil {
		return l
	}
	h := l.Handler()
	if b, ok := h.(*handler); ok {
		h = b.inner // rebinding replaces, it does not stack
	}
	return slog.New(&handler{inner: h, bound: ctx})
}

// handler passes records to inner with the bound context's values.
type handler struct {
	inner slog.Handler
	bound context.Context
}

func (h *handler) ctx(call context.Context) context.Context {
	if call == nil || call == context.Background() {
		return values{Context: context.Background(), bound: h.bound}
	}
	return values{Context: call, bound: h.bound}
}

// Enabled reports whether inner handles level.
func (h *handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(h.ctx(ctx), level)
}

// Handle passes r to inner with the merged context.
func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	return h.inner.Handle(h.ctx(ctx), r)
}

// WithAttrs returns a bound handler whose records carry attrs.
func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &handler{inner: h.inner.WithAttrs(attrs), bound: h.bound}
}

// WithGroup returns a bound handler that nests later attributes in name.
func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{inner: h.inner.WithGroup(name), bound: h.bound}
}

// values is the call's context with the bound context's values under it.
type values struct {
	context.Context
	bound context.Context
}

// Value returns the call context's value for key, else the bound one's.
func (v values) Value(key any) any {
	if x := v.Context.Value(key); x != nil {
		return x
	}
	return v.bound.Value(key)
}
