package telemetry

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestEgressConnection(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	m.EgressConnection("setup", true, "*.pythonhosted.org", 100, 5000)
	m.EgressConnection("setup", true, "*.pythonhosted.org", 10, 50)
	m.EgressConnection("agent", false, "ignored for denied", 0, 0)
	for i := range maxEgressRules + 5 {
		m.EgressConnection("setup", true, fmt.Sprintf("h%d.example", i), 0, 1)
	}
	m.EgressConnection("weird", true, "h0.example", 1, 0)
	checks := []struct {
		c    prometheus.Counter
		want float64
	}{
		{m.egressConns.WithLabelValues("setup", "allowed", "*.pythonhosted.org"), 2},
		{m.egressConns.WithLabelValues("agent", "denied", ""), 1},
		{m.egressConns.WithLabelValues("setup", "allowed", "other"), 6}, // 64 rules: the first and 63 more
		{m.egressConns.WithLabelValues("other", "allowed", "h0.example"), 1},
		{m.egressBytes.WithLabelValues("setup", "up"), 110},
		{m.egressBytes.WithLabelValues("setup", "down"), 5050 + maxEgressRules + 5},
	}
	for i, c := range checks {
		var d dto.Metric
		c.c.Write(&d)
		if got := d.GetCounter().GetValue(); got != c.want {
			t.Errorf("check %d: %v, want %v", i, got, c.want)
		}
	}
	ch := make(chan prometheus.Metric, 1000)
	m.egressConns.Collect(ch)
	if n := len(ch); n > maxEgressRules+4 {
		t.Errorf("%d connection series: the rule label is not bounded", n)
	}
}
