package queue

import (
	"context"
	"strings"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
)

// headerCarrier carries trace context in NATS headers. Keys are written as
// the propagator names them ("traceparent") and read case-insensitively,
// since NATS headers, unlike HTTP's, are case-sensitive.
type headerCarrier nats.Header

func (c headerCarrier) Get(key string) string {
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

func (c headerCarrier) Set(key, value string) { c[key] = []string{value} }

func (c headerCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

var _ propagation.TextMapCarrier = headerCarrier{}

// extractTrace returns ctx extended with the trace context carried in a task
// message's headers, when a Propagator is configured.
func (c *Conn) extractTrace(ctx context.Context, h nats.Header) context.Context {
	if c.cfg.Propagator == nil || h == nil {
		return ctx
	}
	return c.cfg.Propagator.Extract(ctx, headerCarrier(h))
}
