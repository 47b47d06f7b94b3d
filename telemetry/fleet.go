package telemetry

import "github.com/prometheus/client_golang/prometheus"

// Admission durability levels, the level label of
// wrench_admission_durability (see queue.Durability).
var durabilityLevels = []string{"fsync", "replicated", "memory", "unknown"}

// Queue repair kinds, the kind label of wrench_queue_repairs_total.
var repairKinds = []string{"lost_message"}

// fleetMetrics are the metrics of the fleet's reliability: what an accepted
// task survives, and what was repaired.
type fleetMetrics struct {
	durability *prometheus.GaugeVec
	repairs    *prometheus.CounterVec
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
	}
	for _, k := range repairKinds {
		f.repairs.WithLabelValues(k)
	}
	return f
}

func (f fleetMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{f.durability, f.repairs}
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
