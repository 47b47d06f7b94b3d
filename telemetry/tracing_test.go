package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
)

// TestSetupTracingEndpoints: the endpoint comes from the explicit base URL,
// else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the full traces URL, alone
// enough to turn tracing on), else OTEL_EXPORTER_OTLP_ENDPOINT (a base
// URL), all read through Getenv; spans reach the collector at that path.
func TestSetupTracingEndpoints(t *testing.T) {
	paths := make(chan string, 16)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths <- r.URL.Path
	}))
	defer collector.Close()
	for _, tc := range []struct {
		name     string
		explicit string
		env      map[string]string
		want     string // path the spans reach; "" when tracing is off
	}{
		{"traces endpoint alone, used as is", "", map[string]string{
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector.URL + "/custom/traces"}, "/custom/traces"},
		{"base endpoint gets /v1/traces", "", map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL + "/otlp"}, "/otlp/v1/traces"},
		{"traces endpoint wins over the base one", "", map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT":        collector.URL + "/base",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector.URL + "/signal"}, "/signal"},
		{"the explicit endpoint wins over both", collector.URL, map[string]string{
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector.URL + "/signal"}, "/v1/traces"},
		{"disabled", "", map[string]string{
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector.URL + "/signal", "OTEL_TRACES_EXPORTER": "none"}, ""},
		{"nothing set", "", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			tp, shutdown, err := SetupTracing(ctx, TracingConfig{Endpoint: tc.explicit,
				Getenv: func(k string) string { return tc.env[k] }})
			if err != nil {
				t.Fatal(err)
			}
			_, span := tp.Tracer("x").Start(ctx, "s")
			recording := span.SpanContext().IsValid()
			span.End()
			if err := shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if recording {
					t.Error("tracing is on")
				}
				return
			}
			select {
			case got := <-paths:
				if got != tc.want {
					t.Errorf("spans went to %s, want %s", got, tc.want)
				}
			default:
				t.Errorf("no spans reached the collector (want %s)", tc.want)
			}
		})
	}
}

func TestSetupTracingRejectsBadTracesEndpoint(t *testing.T) {
	_, _, err := SetupTracing(context.Background(), TracingConfig{Getenv: func(k string) string {
		if k == "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" {
			return "collector:4318/v1/traces"
		}
		return ""
	}})
	if err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
		t.Errorf("err = %v", err)
	}
}

// TestServiceInstanceIDPerProcess: every tracer provider carries a
// service.instance.id, its own unless one is given.
func TestServiceInstanceIDPerProcess(t *testing.T) {
	ctx := context.Background()
	instance := func(cfg TracingConfig) string {
		t.Helper()
		exp := tracetest.NewInMemoryExporter()
		cfg.Exporter = exp
		tp, shutdown, err := SetupTracing(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, span := tp.Tracer("x").Start(ctx, "s")
		span.End()
		if err := tp.(*sdktrace.TracerProvider).ForceFlush(ctx); err != nil {
			t.Fatal(err)
		}
		spans := exp.GetSpans()
		if err := shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if len(spans) != 1 {
			t.Fatalf("%d spans", len(spans))
		}
		v, _ := spans[0].Resource.Set().Value(semconv.ServiceInstanceIDKey)
		return v.AsString()
	}
	a, b := instance(TracingConfig{}), instance(TracingConfig{})
	if a == "" || a == b {
		t.Errorf("service.instance.id %q and %q: want two distinct ids", a, b)
	}
	if len(a) != 36 || a[14] != '4' {
		t.Errorf("service.instance.id %q is not a v4 UUID", a)
	}
	if got := instance(TracingConfig{ServiceInstanceID: "worker-7"}); got != "worker-7" {
		t.Errorf("service.instance.id %q, want the given worker-7", got)
	}
}
