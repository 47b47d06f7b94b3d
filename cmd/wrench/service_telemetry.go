package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/wrenchworks/wrench/dispatcher"
	"github.com/wrenchworks/wrench/policy"
	"github.com/wrenchworks/wrench/task"
	"github.com/wrenchworks/wrench/telemetry"
)

// serviceTelemetry is what serve and worker set up for observability.
type serviceTelemetry struct {
	registry *prometheus.Registry
	metrics  *telemetry.Metrics
	tp       trace.TracerProvider
	tracer   *telemetry.TaskTracer
	stop     func(context.Context) error
	log      *slog.Logger
}

func newServiceTelemetry(ctx context.Context, env *cliEnv, f serviceFlags, log *slog.Logger) (*serviceTelemetry, error) {
	tp, stop, err := telemetry.SetupTracing(ctx, telemetry.TracingConfig{
		Endpoint: f.otlp, ServiceVersion: buildVersion(), Getenv: env.getenv,
		ServiceInstanceID: f.workerID, // empty: a UUID per process
	})
	if err != nil {
		return nil, err
	}
	reg := telemetry.NewRegistry()
	m := telemetry.NewMetrics(reg)
	m.SetBuildInfo(buildVersion())
	return &serviceTelemetry{registry: reg, metrics: m, tp: tp,
		tracer: telemetry.NewTaskTracer(tp, telemetry.TaskTracerConfig{}), stop: stop, log: log}, nil
}

// shutdown flushes traces, bounded.
func (t *serviceTelemetry) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.stop(ctx); err != nil {
		t.log.Warn("flush traces", "err", err)
	}
}

func (t *serviceTelemetry) dispatcherConfig(f serviceFlags, log *slog.Logger) (dispatcher.Config, error) {
	caps, tenants, err := policyQueue(f)
	if err != nil {
		return dispatcher.Config{}, err
	}
	return dispatcher.Config{
		Caps:         caps,
		Tenants:      tenants,
		Slots:        f.slots,
		WorkerID:     f.workerID,
		PerRepoLimit: f.perRepo,
		Grace:        f.grace,
		AckWait:      f.ackWait,
		Observer:     telemetry.NewObserver(t.metrics, t.tracer, log),
		Logger:       log.With("component", "dispatcher"),
	}, nil
}

// serviceLogger logs JSON on stderr with the task id and trace id of the
// context on every line.
func serviceLogger(env *cliEnv, level string) *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		lvl = slog.LevelInfo
	}
	return slog.New(telemetry.NewLogHandler(env.stderr, &slog.HandlerOptions{Level: lvl}))
}

// policyQueue is what the policy says about the queue: its cluster-wide
// running limits for the dispatcher (nil when it sets none: no limit is
// kept anywhere) and the tenants it names, whose consumers are made at
// start.
func policyQueue(f serviceFlags) (dispatcher.Caps, []string, error) {
	pol, err := policy.Load(f.common.policy, policy.Options{})
	if err != nil {
		return nil, nil, &task.ValidationError{Fields: []task.FieldError{{Field: "--policy", Problem: err.Error()}}}
	}
	var tenants []string
	for _, t := range pol.Tenants {
		tenants = append(tenants, t.Name)
	}
	if !pol.HasRunningLimits() {
		return nil, tenants, nil
	}
	return pol, tenants, nil
}
