package telemetry

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// TracingConfig configures [SetupTracing].
type TracingConfig struct {
	// Endpoint is the OTLP/HTTP base URL (e.g. http://collector:4318);
	// spans go to its /v1/traces, as with OTEL_EXPORTER_OTLP_ENDPOINT.
	// Empty falls back to the standard variables, read through Getenv:
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the full traces URL, used as is),
	// then OTEL_EXPORTER_OTLP_ENDPOINT (a base URL); when none is set,
	// tracing is off and a no-op provider is returned.
	Endpoint string
	// ServiceName is the service.name resource attribute (default "wrench").
	ServiceName string
	// ServiceVersion is the service.version resource attribute.
	ServiceVersion string
	// ServiceInstanceID is the service.instance.id resource attribute,
	// which tells the processes of one deployment apart (default: a random
	// UUID, new for every process).
	ServiceInstanceID string
	// Getenv reads the environment (default: none is read, so tests are
	// hermetic; cmd passes os.Getenv).
	Getenv func(string) string
	// SetGlobal also installs the provider and the W3C trace-context
	// propagator as the OpenTelemetry globals, for libraries that use them.
	SetGlobal bool
	// Exporter replaces the OTLP exporter (tests pass an in-memory one);
	// when set, tracing is on whatever Endpoint says.
	Exporter sdktrace.SpanExporter
}

// Propagator is the trace-context propagator Wrench uses everywhere (HTTP
// and NATS headers): W3C traceparent/tracestate plus baggage.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// SetupTracing returns the tracer provider to hand to the rest of the
// process and a shutdown function that flushes and stops the exporter
// (call it once, with a bounded ctx, at exit). With no endpoint configured
// it returns a no-op provider whose spans cost nothing and a shutdown that
// does nothing.
func SetupTracing(ctx context.Context, cfg TracingConfig) (trace.TracerProvider, func(context.Context) error, error) {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	off := func() (trace.TracerProvider, func(context.Context) error, error) {
		var tp trace.TracerProvider = noop.NewTracerProvider()
		if cfg.SetGlobal {
			otel.SetTracerProvider(tp)
			otel.SetTextMapPropagator(Propagator())
		}
		return tp, func(context.Context) error { return nil }, nil
	}
	var endpoint string
	if cfg.Exporter == nil {
		if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || getenv("OTEL_TRACES_EXPORTER") == "none" {
			return off()
		}
		var err error
		if endpoint, err = tracesEndpoint(cfg.Endpoint, getenv); err != nil {
			return nil, nil, err
		}
		if endpoint == "" {
			return off()
		}
	}
	exp := cfg.Exporter
	if exp == nil {
		// The endpoint is resolved here, through Getenv, rather than left
		// to the exporter, which would read the process environment; the
		// exporter still reads the other OTEL_EXPORTER_OTLP_* variables
		// (headers, TLS, timeout, compression).
		var err error
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
		if err != nil {
			return nil, nil, fmt.Errorf("otlp trace exporter: %w", err)
		}
	}
	name := cfg.ServiceName
	if name == "" {
		name = "wrench"
	}
	instance := cfg.ServiceInstanceID
	if instance == "" {
		instance = randomUUID()
	}
	attrs := []resource.Option{resource.WithAttributes(semconv.ServiceName(name), semconv.ServiceInstanceID(instance))}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, resource.WithAttributes(semconv.ServiceVersion(cfg.ServiceVersion)))
	}
	res, err := resource.New(ctx, append(attrs, resource.WithTelemetrySDK())...)
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("tracing resource: %w", err), exp.Shutdown(ctx))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	if cfg.SetGlobal {
		otel.SetTracerProvider(tp)
		otel.SetTextMapPropagator(Propagator())
	}
	return tp, tp.Shutdown, nil
}

// randomUUID returns a random (version 4) UUID.
func randomUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// tracesEndpoint is the URL spans are sent to, "" when none is configured:
// the explicit base URL (its /v1/traces), else
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, which the OpenTelemetry specification
// makes the full traces URL (used as is), else the base URL
// OTEL_EXPORTER_OTLP_ENDPOINT (its /v1/traces).
func tracesEndpoint(explicit string, getenv func(string) string) (string, error) {
	if explicit != "" {
		return tracesURL(explicit)
	}
	if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")); v != "" {
		u, err := url.Parse(v)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return "", fmt.Errorf("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT %q: want a URL like http://collector:4318/v1/traces", v)
		}
		return v, nil
	}
	if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")); v != "" {
		return tracesURL(v)
	}
	return "", nil
}

// tracesURL turns an OTLP/HTTP base URL into its traces endpoint.
func tracesURL(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", fmt.Errorf("otlp endpoint %q: want a URL like http://collector:4318", base)
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/v1/traces"
	return u.String(), nil
}
