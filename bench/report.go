package bench

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/wrenchworks/wrench/task"
)

// Report sums up a bench run: what `wrench bench run` prints and writes to
// report.md and report.json.
type Report struct {
	Run       string `json:"run"`
	Model     string `json:"model"`
	Instances int    `json:"instances"`
	Resolved  int    `json:"resolved"`
	// ResolvedPct is Resolved over Instances, in percent.
	ResolvedPct   float64 `json:"resolved_pct"`
	ModelFailures int     `json:"model_failures"`
	InfraFailures int     `json:"infra_failures"`
	// InfraFailureRate is InfraFailures over Instances, in percent.
	InfraFailureRate float64 `json:"infra_failure_rate_pct"`
	CostUSD          float64 `json:"cost_usd"`
	// CostPerResolved is CostUSD over Resolved; null when none resolved.
	CostPerResolved *float64 `json:"cost_per_resolved_usd"`
	Tokens          int64    `json:"tokens"`
	Turns           int      `json:"turns"`
	// MedianSeconds is the median wall-clock time of an instance.
	MedianSeconds float64 `json:"median_seconds"`
	// MeanPhases is where an instance's time went on average.
	MeanPhases Phases `json:"mean_phases_seconds"`
	// Rows are the instances, by id.
	Rows []Row `json:"instances_detail"`
}

// Row is one instance in a report.
type Row struct {
	InstanceID string  `json:"instance_id"`
	Resolved   bool    `json:"resolved"`
	Failure    string  `json:"failure,omitempty"`
	Reason     string  `json:"reason,omitempty"`
	FailToPass string  `json:"fail_to_pass"`
	PassToPass string  `json:"pass_to_pass"`
	Turns      int     `json:"turns"`
	CostUSD    float64 `json:"cost_usd"`
	Seconds    float64 `json:"seconds"`
}

// NewReport sums results up. The order of results does not matter.
func NewReport(run, model string, results []Result) Report {
	rs := append([]Result(nil), results...)
	SortResults(rs)
	r := Report{Run: run, Model: model, Instances: len(rs)}
	secs := make([]float64, 0, len(rs))
	for _, x := range rs {
		if x.Resolved {
			r.Resolved++
		}
		switch x.Failure {
		case FailureModel:
			r.ModelFailures++
		case FailureInfra:
			r.InfraFailures++
		}
		r.CostUSD += x.CostUSD
		r.Tokens += x.Tokens
		r.Turns += x.Turns
		secs = append(secs, x.Seconds)
		r.MeanPhases = r.MeanPhases.add(x.Phases)
		r.Rows = append(r.Rows, Row{InstanceID: x.InstanceID, Resolved: x.Resolved, Failure: x.Failure, Reason: oneLine(x.GradeError+x.reasonIfFailed(), 120),
			FailToPass: ratio(x.FailToPass), PassToPass: ratio(x.PassToPass), Turns: x.Turns, CostUSD: x.CostUSD, Seconds: x.Seconds})
	}
	if r.Instances > 0 {
		n := float64(r.Instances)
		r.ResolvedPct = 100 * float64(r.Resolved) / n
		r.InfraFailureRate = 100 * float64(r.InfraFailures) / n
		r.MeanPhases = r.MeanPhases.scale(1 / n)
		r.MedianSeconds = median(secs)
	}
	if r.Resolved > 0 {
		c := r.CostUSD / float64(r.Resolved)
		r.CostPerResolved = &c
	}
	return r
}

func (x Result) reasonIfFailed() string {
	if x.Failure == FailureInfra && x.GradeError == "" {
		return x.Reason
	}
	return ""
}

func (p Phases) add(q Phases) Phases {
	return Phases{p.Queue + q.Queue, p.Setup + q.Setup, p.Baseline + q.Baseline, p.Agent + q.Agent, p.Verify + q.Verify, p.Grade + q.Grade, p.Other + q.Other}
}

func (p Phases) scale(f float64) Phases {
	return Phases{p.Queue * f, p.Setup * f, p.Baseline * f, p.Agent * f, p.Verify * f, p.Grade * f, p.Other * f}
}

func ratio(outs []task.TestOutcome) string {
	if len(outs) == 0 {
		return "-"
	}
	p, n := task.Counts(outs)
	return fmt.Sprintf("%d/%d", p, n)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// WriteMarkdown writes the report as Markdown tables.
func (r Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Bench run %s (model %s)\n\n", r.Run, r.Model)
	b.WriteString("| instances | resolved | resolved % | cost (USD) | cost per resolved | median time | infra failures | model failures |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	cpr := "-"
	if r.CostPerResolved != nil {
		cpr = fmt.Sprintf("%.4f", *r.CostPerResolved)
	}
	fmt.Fprintf(&b, "| %d | %d | %.1f | %.4f | %s | %.1fs | %d (%.1f%%) | %d |\n\n",
		r.Instances, r.Resolved, r.ResolvedPct, r.CostUSD, cpr, r.MedianSeconds, r.InfraFailures, r.InfraFailureRate, r.ModelFailures)
	p := r.MeanPhases
	b.WriteString("Mean time per instance: ")
	fmt.Fprintf(&b, "queue %.1fs, then setup %.1fs, baseline %.1fs, agent %.1fs, verify %.1fs, grading %.1fs, other %.1fs.\n\n",
		p.Queue, p.Setup, p.Baseline, p.Agent, p.Verify, p.Grade, p.Other)
	b.WriteString("| instance | resolved | failure | FAIL_TO_PASS | PASS_TO_PASS | turns | cost (USD) | time | note |\n")
	b.WriteString("|---|:---:|---|---:|---:|---:|---:|---:|---|\n")
	for _, x := range r.Rows {
		mark := "no"
		if x.Resolved {
			mark = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %d | %.4f | %.1fs | %s |\n", mdCell(x.InstanceID), mark, x.Failure,
			x.FailToPass, x.PassToPass, x.Turns, x.CostUSD, x.Seconds, mdCell(x.Reason))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
