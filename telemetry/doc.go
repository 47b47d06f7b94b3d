// Package telemetry is Wrench's observability: Prometheus metrics
// ([Metrics]), OpenTelemetry tracing ([SetupTracing], [TaskTracer], the
// [Propagator] whose trace context the queue carries in NATS headers) and
// structured JSON logs that carry the task id
// and trace id on every line ([NewLogHandler]).
//
// It is the only package besides cmd/wrench that imports the OpenTelemetry
// SDK and exporters; core packages receive a trace.TracerProvider, a
// prometheus.Registerer or a *slog.Logger through their Config.
package telemetry
