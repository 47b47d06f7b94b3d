package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wrenchworks/wrench/task"
)

// Admission durability levels, the level label of
// wrench_admission_durability (see queue.Durability).
var durabilityLevels = []string{"fsync", "replicated", "memory", "unknown"}

// Queue repair kinds, the kind label of wrench_queue_repairs_total.
var repairKinds = []string{"lost_message"}

// Fault blames, the blame label of wrench_task_faults_total.
const (
	// BlameWorker: the worker's own engine, image or disk was unusable;
	// the task was handed to another worker without counting the delivery.
	BlameWorker = "worker"
	// BlameTask: the fault followed the task (it counted toward its
	// deliveries, or ended it).
	BlameTask = "task"
)

// faultClasses are the fault label's values.
var faultClasses = []task.Fault{task.FaultInfra, task.FaultModel, task.FaultSetup, task.FaultInput}

// fleetMetrics are the metrics of the fleet's reliability: what an accepted
// task survives, what was repaired, whose faults attempts ended on.
type fleetMetrics struct {
	durability *prometheus.GaugeVec
	repairs    *prometheus.CounterVec
	faults     *prometheus.CounterVec
	ready      *prometheus.GaugeVec // no labels: absent until a dispatcher reports
	reaped     *prometheus.CounterVec
}

func newFleetMetrics() fleetMetrics {
	f := fleetMetrics{
		durability: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "admission_durability",
			Help: "1 for what an accepted task survives: fsync (every write synced to disk), replicated (on 3+ servers, synced lazily: lost only if they all lose power), memory (one server, synced lazily: lost on an OS crash or power loss), unknown.",
		}, []string{"level"}),
		repairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "queue_repairs_total",
			Help: "Disagreements between the state store and the work queue that were repaired, by kind (lost_message: a task recorded queued with nothing in the queue, queued again).",
		}, []string{"kind"}),
		faults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "task_faults_total",
			Help: "Attempts that ended on a fault, by fault (infrastructure, model, setup, input) and blame: worker (this worker's own engine, image or disk was unusable; the task was handed to another worker without counting the delivery) or task (the fault followed the task: it counted toward its deliveries, or ended it).",
		}, []string{"fault", "blame"}),
		ready: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "worker_ready",
			Help: "1 while this process's dispatcher takes tasks; 0 while its own engine, image or disk is unusable (it probes again and resumes on its own). Absent from a process that runs no tasks.",
		}, nil),
	}
	f.reaped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "orphans_reaped_total",
		Help: "Containers and workspaces the reaper removed, by kind (container, workspace) and cause (owner_gone, owner_zombie, pid_reused, task_final, redelivered, not_running, max_age, unlabelled).",
	}, []string{"kind", "cause"})
	for _, k := range repairKinds {
		f.repairs.WithLabelValues(k)
	}
	f.faults.WithLabelValues(string(task.FaultInfra), BlameWorker)
	for _, c := range faultClasses {
		f.faults.WithLabelValues(string(c), BlameTask)
	}
	return f
}

func (f fleetMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{f.durability, f.repairs, f.faults, f.ready, f.reaped}
}

// OrphanReaped counts a container or workspace the reaper removed (kind
// "container" or "workspace"), by cause (see package sandbox/reaper).
func (m *Metrics) OrphanReaped(kind, cause string) {
	m.reaped.WithLabelValues(kind, cause).Inc()
}

// TaskFault counts an attempt that ended on fault, blamed on the worker or
// the task (BlameWorker, BlameTask).
func (m *Metrics) TaskFault(fault task.Fault, blame string) {
	if fault == task.FaultNone {
		return
	}
	m.faults.WithLabelValues(string(fault), blame).Inc()
}

// SetWorkerReady records whether this process's dispatcher takes tasks.
func (m *Metrics) SetWorkerReady(ready bool) {
	v := 0.0
	if ready {
		v = 1
	}
	m.ready.WithLabelValues().Set(v)
}

// SetAdmissionDurability sets wrench_admission_durability to 1 for level
// (one of fsync, replicated, memory, unknown) and 0 for the others.
func (m *Metrics) SetAdmissionDurability(level string) {
	for _, l := range durabilityLevels {
		v := 0.0
		if l == level {
			v = 1
		}
		m.durability.WithLabelValues(l).Set(v)
	}
}

// QueueRepaired counts n repairs of a kind (lost_message).
func (m *Metrics) QueueRepaired(kind string, n int) {
	m.repairs.WithLabelValues(kind).Add(float64(n))
}
