package telemetry

import (
	"context"
	"io"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// The log attribute keys the context handler adds.
const (
	LogKeyTaskID  = "task_id"
	LogKeyTraceID = "trace_id"
	LogKeySpanID  = "span_id"
)

type taskIDKey struct{}

// WithTaskID returns ctx carrying a task id for [ContextHandler] to log.
func WithTaskID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, taskIDKey{}, id)
}

// TaskIDFrom returns the task id carried by ctx, or "".
func TaskIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(taskIDKey{}).(string)
	return id
}

// NewLogHandler returns the JSON handler Wrench logs with: slog's JSON
// handler on w, wrapped in a [ContextHandler]. Durations are written as
// Go duration strings ("1.5s"), not nanoseconds, wherever they appear
// (see [durationAttr]); a ReplaceAttr in opts runs after that. opts may be
// nil.
func NewLogHandler(w io.Writer, opts *slog.HandlerOptions) slog.Handler {
	var o slog.HandlerOptions
	if opts != nil {
		o = *opts
	}
	o.ReplaceAttr = composeReplace(durationAttr, o.ReplaceAttr)
	return NewContextHandler(slog.NewJSONHandler(w, &o))
}

// durationAttr writes a time.Duration value as its String form: slog's
// JSON handler would write nanoseconds, which nobody reads as a duration.
// slog calls ReplaceAttr for every non-group attribute, inside groups
// too, after resolving LogValuers.
func durationAttr(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// composeReplace returns a ReplaceAttr running first, then next (if any).
func composeReplace(first, next func([]string, slog.Attr) slog.Attr) func([]string, slog.Attr) slog.Attr {
	if next == nil {
		return first
	}
	return func(groups []string, a slog.Attr) slog.Attr {
		return next(groups, first(groups, a))
	}
}

// ContextHandler adds task_id (from [WithTaskID]) and trace_id/span_id
// (from the span in the context) to every record logged with a context
// (slog's *Context methods, e.g. logger.InfoContext(ctx, …)). Records
// inside a group get them inside that group, as slog handlers do.
type ContextHandler struct {
	inner slog.Handler
	// hasTaskID is set once WithAttrs added a task_id, so it is not
	// repeated from the context.
	hasTaskID bool
}

// NewContextHandler wraps inner.
func NewContextHandler(inner slog.Handler) *ContextHandler {
	return &ContextHandler{inner: inner}
}

// Enabled reports whether inner handles level.
func (h *ContextHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

// Handle adds the context's task and trace ids and passes r on.
func (h *ContextHandler) Handle(ctx context.Context, r slog.Record) error {
	if !h.hasTaskID && !recordHas(r, LogKeyTaskID) {
		if id := TaskIDFrom(ctx); id != "" {
			r.AddAttrs(slog.String(LogKeyTaskID, id))
		}
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String(LogKeyTraceID, sc.TraceID().String()), slog.String(LogKeySpanID, sc.SpanID().String()))
	}
	return h.inner.Handle(ctx, r)
}

// recordHas reports whether r has a top-level attribute key.
func recordHas(r slog.Record, key string) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		found = a.Key == key
		return !found
	})
	return found
}

// WithAttrs returns a handler whose records carry attrs.
func (h *ContextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	has := h.hasTaskID
	for _, a := range attrs {
		if a.Key == LogKeyTaskID {
			has = true
		}
	}
	return &ContextHandler{inner: h.inner.WithAttrs(attrs), hasTaskID: has}
}

// WithGroup returns a handler that nests later attributes in group name.
func (h *ContextHandler) WithGroup(name string) slog.Handler {
	return &ContextHandler{inner: h.inner.WithGroup(name), hasTaskID: h.hasTaskID}
}
