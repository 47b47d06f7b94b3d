package telemetry

import (
	"context"
	"strings"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
)

// NATSCarrier adapts a NATS message header to OpenTelemetry propagation, so
// the trace context travels with a task from submit to worker. Keys are
// written as the propagator names them ("traceparent"); reads fall back to a
// case-insensitive match because NATS headers are case-sensitive.
type NATSCarrier nats.Header

var _ propagation.TextMapCarrier = NATSCarrier{}

// Get returns the first value of key.
func (c NATSCarrier) Get(key string) string {
	if v := nats.Header(c).Get(key); v != "" {
		return v
	}
	for k, vs := range c {
		if strings.EqualFold(k, key) && len(vs) > 0 {
			return vs[0]
		}
	}
	return ""
}

// Set replaces the values of key.
func (c NATSCarrier) Set(key, value string) { nats.Header(c).Set(key, value) }

// Keys lists the header's keys.
func (c NATSCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// InjectNATS writes ctx's trace context into h (which must not be nil) with
// [Propagator]. Call it on the message that carries a task to the queue.
func InjectNATS(ctx context.Context, h nats.Header) {
	Propagator().Inject(ctx, NATSCarrier(h))
}

// ExtractNATS returns ctx extended with the trace context found in h (a
// remote parent for the worker's task span); h may be nil.
func ExtractNATS(ctx context.Context, h nats.Header) context.Context {
	if h == nil {
		return ctx
	}
	return Propagator().Extract(ctx, NATSCarrier(h))
}
