package telemetry

import (
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wrenchworks/wrench/task"
)

// Namespace prefixes every Wrench metric name.
const Namespace = "wrench"

// The phase label values of wrench_task_phase_duration_seconds.
const (
	PhaseQueueWait    = "queue_wait"
	PhaseClone        = "clone"
	PhaseSandboxStart = "sandbox_start"
	PhaseBaseline     = "baseline"
	PhaseAgent        = "agent"
	PhaseVerify       = "verify"
	PhaseGrade        = "grade"
)

// durationBuckets spans a task's phases: sub-second clones to hour-long
// agent runs.
var durationBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600}

// maxModelLabels bounds the model label: a task names its own model, so
// without a cap a submitter could mint label values at will.
const maxModelLabels = 32

// Metrics holds Wrench's Prometheus metrics. Create it with [NewMetrics];
// its methods are safe for concurrent use. Label values are normalised to
// bounded sets: unknown tools become "other", models beyond the first 32
// seen become "other", "scripted:FILE" becomes "scripted".
type Metrics struct {
	buildInfo     *prometheus.GaugeVec
	submitted     *prometheus.CounterVec
	finished      *prometheus.CounterVec
	taskDuration  *prometheus.HistogramVec
	phaseDuration *prometheus.HistogramVec
	inFlight      prometheus.Gauge
	slots         prometheus.Gauge
	freeSlots     prometheus.Gauge
	pending       prometheus.Gauge
	ackPending    prometheus.Gauge
	redeliveries  prometheus.Counter
	requeues      *prometheus.CounterVec
	deadLetters   prometheus.Counter
	httpRequests  *prometheus.CounterVec
	httpDuration  *prometheus.HistogramVec
	agentMetrics
	benchMetrics
	fleetMetrics
	egressMetrics
	*tenantMetrics
	budgetMetrics
}

// labelSet bounds a label's values: the first max distinct values keep
// their name, later ones become "other" (a submitter must not be able to
// mint label values at will). It is safe for concurrent use.
type labelSet struct {
	mu   sync.Mutex
	max  int
	seen map[string]bool
}

func newLabelSet(max int) *labelSet { return &labelSet{max: max, seen: map[string]bool{}} }

// value returns v when it is one of the first max values seen, else "other".
func (s *labelSet) value(v string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen[v] {
		return v
	}
	if len(s.seen) >= s.max {
		return "other"
	}
	s.seen[v] = true
	return v
}

// NewMetrics creates Wrench's metrics and registers them with reg (pass a
// fresh prometheus.NewRegistry() in tests; never the default registry in
// library code). It panics if a metric is already registered with reg, as
// prometheus.MustRegister does.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		buildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "build_info",
			Help: "Always 1; the version label names the running build.",
		}, []string{"version"}),
		submitted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "tasks_submitted_total",
			Help: "Tasks accepted for the queue, by source (cli, api, github).",
		}, []string{"source"}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "tasks_finished_total",
			Help: "Tasks that reached a final state, by status.",
		}, []string{"status"}),
		taskDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "task_duration_seconds",
			Help:    "Wall-clock time of a task attempt from start to result, by status.",
			Buckets: durationBuckets,
		}, []string{"status"}),
		phaseDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "task_phase_duration_seconds",
			Help:    "Time a task spent in each phase: queue_wait, clone, sandbox_start, baseline, agent, verify, grade.",
			Buckets: durationBuckets,
		}, []string{"phase"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "tasks_in_flight",
			Help: "Tasks this process is running now.",
		}),
		slots: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "worker_slots",
			Help: "Task slots this process has.",
		}),
		freeSlots: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "worker_free_slots",
			Help: "Task slots of this process that are idle.",
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "consumer_pending_messages",
			Help: "Consumer lag: tasks in the work queue not yet delivered to any worker.",
		}),
		ackPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "consumer_ack_pending_messages",
			Help: "Tasks delivered to a worker and not yet acknowledged.",
		}),
		redeliveries: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "task_redeliveries_total",
			Help: "Task deliveries after the first (a worker failed, timed out or asked for a retry).",
		}),
		requeues: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "task_requeues_total",
			Help: "Attempts handed back to the queue, by reason (retry, worker_fault, shutdown, repo_limit, other).",
		}, []string{"reason"}),
		deadLetters: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "dead_letters_total",
			Help: "Tasks that exhausted their deliveries and were dead-lettered.",
		}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "http_requests_total",
			Help: "HTTP API requests, by route and status code.",
		}, []string{"route", "code"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "http_request_duration_seconds",
			Help:    "HTTP API request latency (event streams excluded), by route.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route"}),
		agentMetrics:  newAgentMetrics(),
		benchMetrics:  newBenchMetrics(),
		fleetMetrics:  newFleetMetrics(),
		egressMetrics: newEgressMetrics(),
		tenantMetrics: newTenantMetrics(),
		budgetMetrics: newBudgetMetrics(),
	}
	reg.MustRegister(m.tenantMetrics.collectors()...)
	reg.MustRegister(m.fleetMetrics.collectors()...)
	reg.MustRegister(m.egressMetrics.collectors()...)
	reg.MustRegister(m.budgetMetrics.collectors()...)
	reg.MustRegister(m.agentMetrics.collectors()...)
	reg.MustRegister(m.benchMetrics.collectors()...)
	reg.MustRegister(m.buildInfo, m.submitted, m.finished, m.taskDuration, m.phaseDuration,
		m.inFlight, m.slots, m.freeSlots, m.pending, m.ackPending, m.redeliveries, m.requeues, m.deadLetters,
		m.httpRequests, m.httpDuration)
	// Pre-create the label sets operators alert on, so a series exists at 0
	// before the first event (rate() over a missing series is empty).
	for _, s := range []task.State{task.StateResolved, task.StateUnresolved, task.StateFailed,
		task.StateCancelled, task.StateTimedOut, task.StateRejected} {
		m.finished.WithLabelValues(string(s))
	}
	for _, r := range requeueReasons {
		m.requeues.WithLabelValues(r)
	}
	return m
}

// SetBuildInfo records the running version in wrench_build_info.
func (m *Metrics) SetBuildInfo(version string) {
	m.buildInfo.WithLabelValues(version).Set(1)
}

// TaskSubmitted counts a task accepted for the queue; source is the task's
// Source.Kind.
func (m *Metrics) TaskSubmitted(source string) {
	switch source {
	case "cli", "api", "github":
	case "":
		source = "unknown"
	default:
		source = "other"
	}
	m.submitted.WithLabelValues(source).Inc()
}

// TaskStarted records that this process began an attempt of a task that
// waited queueWait since it was submitted; attempt > 1 is a redelivery.
// Pair it with [Metrics.TaskEnded].
func (m *Metrics) TaskStarted(queueWait time.Duration, attempt int) {
	m.inFlight.Inc()
	if attempt > 1 {
		m.redeliveries.Inc()
	}
	if queueWait > 0 {
		m.phaseDuration.WithLabelValues(PhaseQueueWait).Observe(queueWait.Seconds())
	}
}

// TaskEnded records that an attempt begun with [Metrics.TaskStarted] is no
// longer running, whether it finished or was handed back.
func (m *Metrics) TaskEnded() { m.inFlight.Dec() }

// requeueReasons are the values of wrench_task_requeues_total's reason
// label (TaskRequeued maps the dispatcher's reasons onto them).
var requeueReasons = []string{"retry", "worker_fault", "shutdown", "repo_limit", "other"}

// TaskRequeued counts an attempt handed back for another delivery; reason
// is the dispatcher's ("retry: …", "worker fault: …", "shutdown",
// "repo_limit"). A retry counts as an infrastructure fault of the task, a
// worker fault as one of the worker (wrench_task_faults_total).
func (m *Metrics) TaskRequeued(reason string) {
	switch {
	case strings.HasPrefix(reason, "retry"):
		reason = "retry"
		m.TaskFault(task.FaultInfra, BlameTask)
	case strings.HasPrefix(reason, "worker fault"):
		reason = "worker_fault"
		m.TaskFault(task.FaultInfra, BlameWorker)
	case reason == "shutdown", reason == "repo_limit":
	default:
		reason = "other"
	}
	m.requeues.WithLabelValues(reason).Inc()
}

// TaskFinished records a task's final result: wrench_tasks_finished_total,
// the attempt's duration (elapsed, or the result's Timings.Total when
// elapsed is zero) and the duration of each phase from res.Timings.
func (m *Metrics) TaskFinished(res task.Result, elapsed time.Duration) {
	status := string(res.Status)
	if !res.Status.Final() {
		status = "other"
	}
	m.finished.WithLabelValues(status).Inc()
	m.tenantMetrics.finished(res.Tenant, status)
	m.TaskFault(res.Fault, BlameTask)
	m.benchFinished(res)
	if elapsed <= 0 {
		elapsed = res.Timings.Total
	}
	if elapsed > 0 {
		m.taskDuration.WithLabelValues(status).Observe(elapsed.Seconds())
	}
	for _, p := range []struct {
		name string
		d    time.Duration
	}{
		{PhaseClone, res.Timings.Clone},
		{PhaseSandboxStart, res.Timings.SandboxStart},
		{PhaseBaseline, res.Timings.Baseline},
		{PhaseAgent, res.Timings.Agent},
		{PhaseVerify, res.Timings.Verify},
		{PhaseGrade, res.Timings.Grade},
	} {
		if p.d > 0 {
			m.phaseDuration.WithLabelValues(p.name).Observe(p.d.Seconds())
		}
	}
}

// benchFinished records a graded bench task: its outcome and its cost by
// bench run and model (the names the bench run reports under).
func (m *Metrics) benchFinished(res task.Result) {
	g := res.Grade
	if g == nil || g.Run == "" {
		return
	}
	outcome := "resolved"
	if ok, fault := res.Verdict(); !ok {
		outcome = string(fault)
	}
	run, model := m.runLabel(g.Run), m.modelLabel(g.Model)
	m.benchTasks.WithLabelValues(run, model, outcome).Inc()
	m.benchCost.WithLabelValues(run, model).Add(res.Usage.CostUSD)
}

// runLabel bounds the run label's values like modelLabel bounds models.
func (m *Metrics) runLabel(run string) string {
	if len(run) > 64 {
		run = run[:64]
	}
	return m.benchRuns.value(run)
}

// SetSlots records this process's slot count and how many are idle.
func (m *Metrics) SetSlots(total, free int) {
	m.slots.Set(float64(total))
	m.freeSlots.Set(float64(free))
}

// SetConsumerLag records the work-queue consumer's pending (not yet
// delivered) and ack-pending (delivered, unacknowledged) message counts.
func (m *Metrics) SetConsumerLag(pending, ackPending uint64) {
	m.pending.Set(float64(pending))
	m.ackPending.Set(float64(ackPending))
}

// DeadLettered counts a task that exhausted its deliveries.
func (m *Metrics) DeadLettered() { m.deadLetters.Inc() }

// HTTPRequest records one API request; route is the mux pattern (bounded),
// never the raw path.
func (m *Metrics) HTTPRequest(route string, code int, d time.Duration, stream bool) {
	if route == "" {
		route = "unmatched"
	}
	m.httpRequests.WithLabelValues(route, statusCode(code)).Inc()
	if !stream {
		m.httpDuration.WithLabelValues(route).Observe(d.Seconds())
	}
}

func statusCode(code int) string {
	if code < 100 || code > 999 {
		return "other"
	}
	return string([]byte{byte('0' + code/100), byte('0' + code/10%10), byte('0' + code%10)})
}

// modelLabel bounds the model label's values.
func (m *Metrics) modelLabel(model string) string {
	switch {
	case model == "":
		return "unknown"
	case strings.HasPrefix(model, "scripted:") || model == "scripted":
		return "scripted"
	}
	if len(model) > 64 {
		model = model[:64]
	}
	return m.models.value(model)
}
