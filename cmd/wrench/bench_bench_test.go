package main

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// BenchmarkBenchRun measures `wrench bench run` end to end (the built
// binary, its in-process server, the real worker and Docker engine, the
// gold oracle through the scripted model) on the four instances mined from
// benchHistory, with the test command run before and after the agent:
// instances per hour, and where an instance's time goes. Each iteration is
// a whole run: use -benchtime=3x.
func BenchmarkBenchRun(b *testing.B) {
	requireImage(b)
	deployment := testDeployment("benchrun")
	b.Cleanup(func() { removeContainers(deployment) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	file, ins, _ := mineBench(b, ctx, deployment, benchHistory(b), "--confirm=false")
	for _, conc := range []int{1, 2} {
		b.Run("concurrency="+strconv.Itoa(conc), func(b *testing.B) {
			var elapsed time.Duration
			var setup, baseline, agent, grade, total float64
			for range b.N {
				start := time.Now()
				_, rep := benchRun(b, ctx, deployment, file, "gold", "--concurrency", strconv.Itoa(conc), "--test-command", "go test ./...")
				elapsed += time.Since(start)
				if rep.Resolved != len(ins) {
					b.Fatalf("gold resolved %d of %d", rep.Resolved, len(ins))
				}
				p := rep.MeanPhases
				setup, baseline, agent, grade = setup+p.Setup, baseline+p.Baseline, agent+p.Agent+p.Verify, grade+p.Grade
				for _, r := range rep.Rows {
					total += r.Seconds / float64(len(rep.Rows))
				}
			}
			n := float64(b.N)
			b.ReportMetric(float64(b.N*len(ins))/elapsed.Hours(), "instances/h")
			b.ReportMetric(setup/n, "s-setup/inst")
			b.ReportMetric(baseline/n, "s-baseline/inst")
			b.ReportMetric(agent/n, "s-agent+verify/inst")
			b.ReportMetric(grade/n, "s-grade/inst")
			b.ReportMetric(total/n, "s-task/inst")
		})
	}
}
