package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"
)

// maxEgressRules bounds the rule label of wrench_egress_connections_total:
// rules come from the server policy and repositories' files, so a cap keeps
// a permissive policy from minting series.
const maxEgressRules = 64

// egressMetrics count connections through the egress proxy (see package
// egress). The host a sandbox asked for is never a label (the sandbox
// chooses it); the allowlist rule that admitted it is, bounded.
type egressMetrics struct {
	egressConns *prometheus.CounterVec
	egressBytes *prometheus.CounterVec
	egressRules *labelSet
}

func newEgressMetrics() egressMetrics {
	e := egressMetrics{
		egressConns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "egress_connections_total",
			Help: "Tunnels and forwarded requests through the egress proxy, by phase (setup, agent), verdict (allowed, denied) and the allowlist rule that allowed them (empty when denied; past 64 rules, other).",
		}, []string{"phase", "verdict", "rule"}),
		egressBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "egress_bytes_total",
			Help: "Bytes through the egress proxy (tunnel payload, request and response bodies), by phase and direction (up: out of the sandbox, down: into it), counted when a connection ends.",
		}, []string{"phase", "direction"}),
		egressRules: newLabelSet(maxEgressRules),
	}
	for _, p := range []string{"setup", "agent"} {
		e.egressConns.WithLabelValues(p, "denied", "")
		e.egressBytes.WithLabelValues(p, "up")
		e.egressBytes.WithLabelValues(p, "down")
	}
	return e
}

func (e egressMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{e.egressConns, e.egressBytes}
}

// EgressConnection counts one ended (or denied) egress connection: phase
// is "setup" or "agent", rule the allowlist pattern that allowed it ("" for
// a denied one), up and down its bytes.
func (m *Metrics) EgressConnection(phase string, allowed bool, rule string, up, down int64) {
	if phase != "setup" && phase != "agent" {
		phase = "other"
	}
	verdict := "denied"
	if allowed {
		verdict = "allowed"
		rule = m.egressRules.value(rule)
	} else {
		rule = ""
	}
	m.egressConns.WithLabelValues(phase, verdict, rule).Inc()
	m.egressBytes.WithLabelValues(phase, "up").Add(float64(up))
	m.egressBytes.WithLabelValues(phase, "down").Add(float64(down))
}
