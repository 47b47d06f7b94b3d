package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wrenchworks/wrench/task"
)

// tenantOther is the tenant label of tenants beyond the first
// task.MaxTenants this process saw, and of names that are not tenant
// names: a task message published by hand must not mint label values.
const tenantOther = "other"

// tenantMetrics are the per-tenant metrics. The tenant label holds at most
// task.MaxTenants values (a policy names at most that many), then "other".
type tenantMetrics struct {
	tenantFinished *prometheus.CounterVec
	tenantWait     *prometheus.HistogramVec
	tenants        *labelSet
}

func newTenantMetrics() *tenantMetrics {
	return &tenantMetrics{
		tenantFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "tenant_tasks_finished_total",
			Help: "Tasks that reached a final state here, by tenant and status (the tenant label holds at most 64 values, then other).",
		}, []string{"tenant", "status"}),
		tenantWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "tenant_queue_wait_seconds",
			Help:    "Time from submission to the start of an attempt, by tenant: what fair share between tenants bounds.",
			Buckets: durationBuckets,
		}, []string{"tenant"}),
		tenants: newLabelSet(task.MaxTenants),
	}
}

func (t *tenantMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{t.tenantFinished, t.tenantWait}
}

// tenantLabel bounds the tenant label's values.
func (t *tenantMetrics) tenantLabel(name string) string {
	if name == "" {
		return task.DefaultTenant
	}
	if !task.ValidTenant(name) {
		return tenantOther
	}
	return t.tenants.value(name)
}

// TenantStarted records the queue wait of an attempt of tenant's task.
func (m *Metrics) TenantStarted(tenant string, queueWait time.Duration) {
	if queueWait > 0 {
		m.tenantWait.WithLabelValues(m.tenantLabel(tenant)).Observe(queueWait.Seconds())
	}
}

func (t *tenantMetrics) finished(tenant, status string) {
	t.tenantFinished.WithLabelValues(t.tenantLabel(tenant), status).Inc()
}
