package telemetry

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/wrenchworks/wrench/task"
)

// exercise touches every metric so each family appears in a scrape.
func exercise(m *Metrics) {
	m.SetBuildInfo("test")
	m.TaskSubmitted("cli")
	m.TaskSubmitted("")
	m.TaskStarted(1500*time.Millisecond, 2)
	m.TenantStarted("payments", 1500*time.Millisecond)
	m.SetSlots(4, 3)
	m.SetConsumerLag(7, 1)
	m.TaskRequeued("retry: clone: connection refused")
	m.TaskRequeued("worker fault: docker engine unreachable")
	m.SetWorkerReady(true)
	m.OrphanReaped("container", "owner_zombie")
	m.DeadLettered()
	m.HTTPRequest("POST /v1/tasks", 201, 3*time.Millisecond, false)
	now := time.Now()
	for _, ev := range []task.Event{
		{Kind: task.EventPhase, Phase: "sandbox", Text: " start", Time: now},
		{Kind: task.EventPhase, Phase: "sandbox", Text: " end", Time: now},
		{Kind: task.EventUsage, Model: "gpt-4o", Usage: &task.Usage{InputTokens: 100, OutputTokens: 20, CostUSD: 0.01, ModelCalls: 1}},
		{Kind: task.EventToolResult, Tool: "bash"},
		{Kind: task.EventToolResult, Tool: "edit", IsError: true},
		{Kind: task.EventCheckpoint},
		{Kind: task.EventRollback},
	} {
		m.ObserveEvent(ev)
	}
	m.TaskFinished(task.Result{Status: task.StateResolved, Tenant: "payments", Timings: task.Timings{
		Clone: time.Second, SandboxStart: time.Second, Baseline: time.Second,
		Agent: time.Minute, Verify: time.Second, Total: 2 * time.Minute,
	}}, 0)
	m.TaskEnded()
	// Three graded bench tasks: resolved, the model's failure, the
	// infrastructure's (grading could not run).
	passed := []task.TestOutcome{{Name: "TestA", Status: task.TestPassed}}
	for _, g := range []*task.Grade{
		{Run: "nightly", Model: "gold", Resolved: true, FailToPass: passed},
		{Run: "nightly", Model: "gold"},
		{Run: "nightly", Model: "gold", Error: "the test patch does not apply"},
	} {
		m.TaskFinished(task.Result{Status: task.StateResolved, Grade: g, Usage: task.Usage{CostUSD: 0.25},
			Timings: task.Timings{Grade: time.Second, Total: time.Minute}}, 0)
	}
}

func scrape(t *testing.T, reg *prometheus.Registry) []byte {
	t.Helper()
	srv := httptest.NewServer(Handler(reg))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func TestMetricsLintClean(t *testing.T) {
	reg := prometheus.NewRegistry()
	exercise(NewMetrics(reg))
	problems, err := promlint.NewWithMetricFamilies(mustGather(t, reg)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

func mustGather(t *testing.T, reg *prometheus.Registry) []*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// TestMetricsPromtool runs the real `promtool check metrics` (Debian package
// "prometheus") on a scrape.
func TestMetricsPromtool(t *testing.T) {
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not found; install the Debian package prometheus")
		}
		t.Skip("promtool not found (apt-get install prometheus); the promlint test covers the same rules")
	}
	reg := NewRegistry() // as served: with the Go and process collectors
	exercise(NewMetrics(reg))
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = bytes.NewReader(scrape(t, reg))
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

func TestMetricsNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	exercise(NewMetrics(reg))
	body := string(scrape(t, reg))
	for _, want := range []string{
		`wrench_tasks_submitted_total{source="cli"} 1`,
		`wrench_tasks_submitted_total{source="unknown"} 1`,
		`wrench_tasks_finished_total{status="resolved"} 4`,
		`wrench_tasks_finished_total{status="failed"} 0`,
		`wrench_task_phase_duration_seconds_count{phase="queue_wait"} 1`,
		`wrench_task_phase_duration_seconds_count{phase="clone"} 1`,
		`wrench_task_phase_duration_seconds_count{phase="sandbox_start"} 1`,
		`wrench_task_phase_duration_seconds_count{phase="agent"} 1`,
		`wrench_task_phase_duration_seconds_count{phase="verify"} 1`,
		`wrench_task_duration_seconds_count{status="resolved"} 4`,
		`wrench_tasks_in_flight 0`,
		`wrench_worker_slots 4`,
		`wrench_worker_free_slots 3`,
		`wrench_consumer_pending_messages 7`,
		`wrench_consumer_ack_pending_messages 1`,
		`wrench_task_redeliveries_total 1`,
		`wrench_task_requeues_total{reason="retry"} 1`,
		`wrench_dead_letters_total 1`,
		`wrench_model_requests_total{model="gpt-4o"} 1`,
		`wrench_model_tokens_total{model="gpt-4o",type="input"} 100`,
		`wrench_model_tokens_total{model="gpt-4o",type="output"} 20`,
		`wrench_model_cost_usd_total{model="gpt-4o"} 0.01`,
		`wrench_tool_calls_total{outcome="ok",tool="bash"} 1`,
		`wrench_tool_calls_total{outcome="error",tool="edit"} 1`,
		`wrench_sandbox_starts_total 1`,
		`wrench_sandbox_start_failures_total 0`,
		`wrench_checkpoints_total 1`,
		`wrench_rollbacks_total 1`,
		`wrench_http_requests_total{code="201",route="POST /v1/tasks"} 1`,
		`wrench_build_info{version="test"} 1`,
		`wrench_bench_tasks_total{model="gold",outcome="resolved",run="nightly"} 1`,
		`wrench_bench_tasks_total{model="gold",outcome="model",run="nightly"} 1`,
		`wrench_bench_tasks_total{model="gold",outcome="infrastructure",run="nightly"} 1`,
		`wrench_bench_cost_usd_total{model="gold",run="nightly"} 0.75`,
		`wrench_task_phase_duration_seconds_count{phase="grade"} 3`,
		`wrench_tenant_tasks_finished_total{status="resolved",tenant="payments"} 1`,
		`wrench_tenant_tasks_finished_total{status="resolved",tenant="default"} 3`,
		`wrench_tenant_queue_wait_seconds_count{tenant="payments"} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("scrape lacks %q", want)
		}
	}
}

func TestMetricsBoundedLabels(t *testing.T) {
	tests := []struct {
		name  string
		ev    task.Event
		check func(m *Metrics) float64
	}{
		{"unknown tool is other", task.Event{Kind: task.EventToolResult, Tool: "rm_rf"},
			func(m *Metrics) float64 { return value(m.toolCalls.WithLabelValues("other", "ok")) }},
		{"optional search tool is its own label", task.Event{Kind: task.EventToolResult, Tool: "search"},
			func(m *Metrics) float64 { return value(m.toolCalls.WithLabelValues("search", "ok")) }},
		{"optional research tool is its own label", task.Event{Kind: task.EventToolResult, Tool: "research"},
			func(m *Metrics) float64 { return value(m.toolCalls.WithLabelValues("research", "ok")) }},
		{"scripted model collapses", task.Event{Kind: task.EventUsage, Model: "scripted:/tmp/x.yaml", Usage: &task.Usage{InputTokens: 5}},
			func(m *Metrics) float64 { return value(m.modelTokens.WithLabelValues("scripted", "input")) / 5 }},
		{"empty model is unknown", task.Event{Kind: task.EventUsage},
			func(m *Metrics) float64 { return value(m.modelRequests.WithLabelValues("unknown")) }},
		{"sandbox failure", task.Event{Kind: task.EventPhase, Phase: "sandbox", Text: " failed: no such image", IsError: true},
			func(m *Metrics) float64 { return value(m.sandboxFailures) }},
		{"sandbox start event alone counts nothing", task.Event{Kind: task.EventPhase, Phase: "sandbox", Text: " start"},
			func(m *Metrics) float64 { return 1 - value(m.sandboxStarts) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMetrics(prometheus.NewRegistry())
			m.ObserveEvent(tc.ev)
			if got := tc.check(m); got != 1 {
				t.Errorf("got %v, want 1", got)
			}
		})
	}
}

func TestMetricsModelCap(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	for i := range maxModelLabels + 5 {
		m.ObserveEvent(task.Event{Kind: task.EventUsage, Model: "m" + strings.Repeat("x", i)})
	}
	if got := value(m.modelRequests.WithLabelValues("other")); got != 5 {
		t.Errorf("other = %v, want 5", got)
	}
	if n := count(m.modelRequests); n != maxModelLabels+1 {
		t.Errorf("series = %d, want %d", n, maxModelLabels+1)
	}
}

// value reads a counter's or gauge's current value.
func value(c prometheus.Collector) float64 {
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	var m dto.Metric
	if err := (<-ch).Write(&m); err != nil {
		panic(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// count is the number of series a collector exports.
func count(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric)
	go func() { c.Collect(ch); close(ch) }()
	n := 0
	for range ch {
		n++
	}
	return n
}

// The tenant label holds at most task.MaxTenants names; further tenants
// and names that are no tenant's (a message published by hand) are other.
func TestMetricsTenantCap(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	for i := range task.MaxTenants + 4 {
		m.TaskFinished(task.Result{Status: task.StateResolved, Tenant: fmt.Sprintf("t%d", i)}, time.Second)
	}
	m.TaskFinished(task.Result{Status: task.StateResolved, Tenant: "Not.A.Tenant"}, time.Second)
	if got := value(m.tenantFinished.WithLabelValues("other", "resolved")); got != 5 {
		t.Errorf("other = %v, want 5", got)
	}
	if n := count(m.tenantFinished); n != task.MaxTenants+1 {
		t.Errorf("series = %d, want %d", n, task.MaxTenants+1)
	}
}

func TestMetricsBenchRunCap(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	m.TaskFinished(task.Result{Status: task.StateResolved}, time.Second) // not a bench task
	if n := count(m.benchTasks); n != 0 {
		t.Fatalf("a task without grading made %d bench series", n)
	}
	for i := range maxModelLabels + 3 {
		m.TaskFinished(task.Result{Status: task.StateFailed, Reason: "start sandbox: image_missing",
			Grade: &task.Grade{Run: "run-" + strings.Repeat("x", i), Model: "scripted:/tmp/s.yaml"}}, time.Second)
	}
	if got := value(m.benchTasks.WithLabelValues("other", "scripted", "infrastructure")); got != 3 {
		t.Errorf("other = %v, want 3", got)
	}
	if n := count(m.benchTasks); n != maxModelLabels+1 {
		t.Errorf("series = %d, want %d", n, maxModelLabels+1)
	}
}

// TestMetricsAlertedSeriesStartAtZero: the labelled counters the alert
// rules compare with 0 (wrench_tasks_finished_total by status,
// wrench_task_requeues_total by reason) exist at 0 in a fresh registry;
// before the first event an absent series makes `increase(...) == 0`
// empty, and an alert waiting on it can never fire.
func TestMetricsAlertedSeriesStartAtZero(t *testing.T) {
	reg := NewRegistry()
	NewMetrics(reg)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if m.GetCounter() != nil && m.GetCounter().GetValue() == 0 {
					got[mf.GetName()+"/"+lp.GetValue()] = true
				}
			}
		}
	}
	for _, want := range []string{
		"wrench_task_requeues_total/retry", "wrench_task_requeues_total/shutdown",
		"wrench_task_requeues_total/repo_limit", "wrench_task_requeues_total/other",
		"wrench_tasks_finished_total/resolved", "wrench_tasks_finished_total/failed",
		"wrench_tasks_finished_total/timed_out", "wrench_tasks_finished_total/cancelled",
	} {
		if !got[want] {
			t.Errorf("a fresh registry has no %s at 0", want)
		}
	}
}

// Whose fault: a worker fault's hand-back blames the worker, a retry and a
// final result with a fault the task; readiness exists only once reported.
func TestMetricsFaultsAndReadiness(t *testing.T) {
	reg := NewRegistry()
	m := NewMetrics(reg)
	if strings.Contains(string(scrape(t, reg)), "wrench_worker_ready") {
		t.Error("a process that runs no tasks exports wrench_worker_ready")
	}
	m.TaskRequeued("worker fault: docker engine unreachable")
	m.TaskRequeued("retry: clone: connection reset")
	m.TaskFinished(task.Result{Status: task.StateFailed, Fault: task.FaultSetup}, time.Second)
	m.SetWorkerReady(false)
	body := string(scrape(t, reg))
	for _, want := range []string{
		`wrench_task_faults_total{blame="worker",fault="infrastructure"} 1`,
		`wrench_task_faults_total{blame="task",fault="infrastructure"} 1`,
		`wrench_task_faults_total{blame="task",fault="setup"} 1`,
		`wrench_task_requeues_total{reason="worker_fault"} 1`,
		"wrench_worker_ready 0",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}
