package deploytest

import (
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/wrenchworks/wrench/telemetry"
)

// family is what a query may use of one exported metric family.
type family struct {
	typ    dto.MetricType
	labels map[string]bool
}

// recorder remembers the collectors registered through it.
type recorder struct {
	prometheus.Registerer
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registerer.Register(c)
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	r.collectors = append(r.collectors, cs...)
	r.Registerer.MustRegister(cs...)
}

// exportedFamilies returns the metric families a wrench process serves on
// /metrics: telemetry's metrics on telemetry's registry (Go and process
// collectors included). Label-vector metrics appear in a scrape only once
// they have a child, so one child is made for each, with empty label
// values, to learn their names, types and label names.
func exportedFamilies(t *testing.T) map[string]family {
	t.Helper()
	reg := telemetry.NewRegistry()
	rec := &recorder{Registerer: reg}
	telemetry.NewMetrics(rec)
	if len(rec.collectors) == 0 {
		t.Fatal("telemetry.NewMetrics registered no collectors")
	}
	for _, c := range rec.collectors {
		m := reflect.ValueOf(c).MethodByName("GetMetricWithLabelValues")
		if !m.IsValid() {
			continue // not a vector
		}
		for n := 0; n <= 10; n++ {
			args := make([]reflect.Value, n)
			for i := range args {
				args[i] = reflect.ValueOf("")
			}
			if out := m.Call(args); out[1].IsNil() {
				break
			}
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]family{}
	for _, mf := range mfs {
		f := family{typ: mf.GetType(), labels: map[string]bool{}}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				f.labels[lp.GetName()] = true
			}
		}
		out[mf.GetName()] = f
	}
	return out
}

// seriesLabels resolves a series name as PromQL sees it (histogram and
// summary series carry _bucket, _sum, _count) to the labels it may carry;
// ok is false for a name no family exports. Every scraped series also has
// job and instance, and up is Prometheus's own.
func seriesLabels(fams map[string]family, name string) (map[string]bool, bool) {
	labels := map[string]bool{"job": true, "instance": true}
	if name == "up" {
		return labels, true
	}
	if f, ok := fams[name]; ok && f.typ != dto.MetricType_HISTOGRAM && f.typ != dto.MetricType_SUMMARY {
		for l := range f.labels {
			labels[l] = true
		}
		return labels, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, found := strings.CutSuffix(name, suffix)
		if !found {
			continue
		}
		f, ok := fams[base]
		if !ok || (f.typ != dto.MetricType_HISTOGRAM && f.typ != dto.MetricType_SUMMARY) {
			continue
		}
		if suffix == "_bucket" && f.typ != dto.MetricType_HISTOGRAM {
			continue
		}
		for l := range f.labels {
			labels[l] = true
		}
		if suffix == "_bucket" {
			labels["le"] = true
		}
		return labels, true
	}
	return nil, false
}

var (
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	promSelector = regexp.MustCompile(`\{([^}]*)\}`)
	promMatcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"inf": true, "nan": true}
)

// promUse is what one PromQL expression refers to.
type promUse struct {
	metrics map[string]map[string]bool // metric name -> label names matched in its selectors
	grouped map[string]bool            // label names in by/without/on/ignoring clauses
}

// parsePromQL finds the metric names and label names an expression uses.
// It is a scanner, not a parser: enough for the queries in this
// repository, which it is tested on.
func parsePromQL(expr string) promUse {
	u := promUse{metrics: map[string]map[string]bool{}, grouped: map[string]bool{}}
	// Selector label names, before strings go: {a="x",b=~"y"}.
	s := promString.ReplaceAllString(expr, `""`)
	s = promRange.ReplaceAllString(s, "")
	for _, m := range promGrouping.FindAllStringSubmatch(s, -1) {
		for _, l := range strings.Split(m[2], ",") {
			if l = strings.TrimSpace(l); l != "" {
				u.grouped[l] = true
			}
		}
	}
	s = promGrouping.ReplaceAllString(s, " ")
	// Walk identifiers; one followed by "(" is a function, by "{" a metric
	// with a selector.
	for _, loc := range promIdent.FindAllStringIndex(s, -1) {
		name := s[loc[0]:loc[1]]
		if promKeywords[strings.ToLower(name)] || (loc[0] > 0 && (s[loc[0]-1] == '$' || isDigitOrDot(s[loc[0]-1]))) {
			continue
		}
		rest := strings.TrimLeft(s[loc[1]:], " ")
		if strings.HasPrefix(rest, "(") {
			continue
		}
		if inSelector(s, loc[0]) {
			continue
		}
		labels := u.metrics[name]
		if labels == nil {
			labels = map[string]bool{}
			u.metrics[name] = labels
		}
		if strings.HasPrefix(rest, "{") {
			if m := promSelector.FindStringSubmatch(rest); m != nil {
				for _, lm := range promMatcher.FindAllStringSubmatch(m[1], -1) {
					labels[lm[1]] = true
				}
			}
		}
	}
	return u
}

func isDigitOrDot(b byte) bool { return b >= '0' && b <= '9' || b == '.' }

// inSelector reports whether position i is inside {...}.
func inSelector(s string, i int) bool {
	return strings.LastIndex(s[:i], "{") > strings.LastIndex(s[:i], "}")
}

// checkQuery reports the metric and label names expr uses that no wrench
// process exports.
func checkQuery(fams map[string]family, expr string) []string {
	var problems []string
	u := parsePromQL(expr)
	if len(u.metrics) == 0 {
		problems = append(problems, "queries no metric")
	}
	all := map[string]bool{}
	for name, used := range u.metrics {
		labels, ok := seriesLabels(fams, name)
		if !ok {
			problems = append(problems, "unknown metric "+name)
			continue
		}
		for l := range labels {
			all[l] = true
		}
		for l := range used {
			if !labels[l] {
				problems = append(problems, "metric "+name+" has no label "+l)
			}
		}
	}
	for l := range u.grouped {
		if !all[l] && len(problems) == 0 {
			problems = append(problems, "groups by label "+l+", which none of its metrics has")
		}
	}
	sort.Strings(problems)
	return problems
}

// TestPromQLScanner pins the scanner on the kinds of queries the dashboard
// and rules use, and shows that checkQuery catches wrong names.
func TestPromQLScanner(t *testing.T) {
	fams := exportedFamilies(t)
	for _, tc := range []struct {
		expr    string
		metrics []string
		grouped []string
		bad     string // a problem checkQuery must report, or "" for none
	}{
		{expr: `sum by (status) (rate(wrench_tasks_finished_total{job=~"$job",instance=~"$instance"}[$__rate_interval])) * 60`,
			metrics: []string{"wrench_tasks_finished_total"}, grouped: []string{"status"}},
		{expr: `histogram_quantile(0.95, sum by (le, phase) (rate(wrench_task_phase_duration_seconds_bucket[5m])))`,
			metrics: []string{"wrench_task_phase_duration_seconds_bucket"}, grouped: []string{"le", "phase"}},
		{expr: "sum(wrench_worker_free_slots) == 0\nand\nmax(wrench_consumer_pending_messages) > 0",
			metrics: []string{"wrench_consumer_pending_messages", "wrench_worker_free_slots"}},
		{expr: `up{job=~".*wrench.*"} == 0`, metrics: []string{"up"}},
		{expr: `sum(rate(wrench_tasks_finishd_total[5m]))`, metrics: []string{"wrench_tasks_finishd_total"},
			bad: "unknown metric wrench_tasks_finishd_total"},
		{expr: `sum(rate(wrench_tasks_finished_total{state="failed"}[5m]))`, metrics: []string{"wrench_tasks_finished_total"},
			bad: "metric wrench_tasks_finished_total has no label state"},
		{expr: `sum by (phase) (rate(wrench_task_duration_seconds_count[5m]))`, metrics: []string{"wrench_task_duration_seconds_count"},
			grouped: []string{"phase"}, bad: "groups by label phase, which none of its metrics has"},
		{expr: `wrench_worker_slots_bucket`, metrics: []string{"wrench_worker_slots_bucket"},
			bad: "unknown metric wrench_worker_slots_bucket"},
	} {
		u := parsePromQL(tc.expr)
		var metrics, grouped []string
		for m := range u.metrics {
			metrics = append(metrics, m)
		}
		for g := range u.grouped {
			grouped = append(grouped, g)
		}
		sort.Strings(metrics)
		sort.Strings(grouped)
		if strings.Join(metrics, ",") != strings.Join(tc.metrics, ",") || strings.Join(grouped, ",") != strings.Join(tc.grouped, ",") {
			t.Errorf("%s:\n metrics %v grouped %v\n want %v %v", tc.expr, metrics, grouped, tc.metrics, tc.grouped)
		}
		problems := checkQuery(fams, tc.expr)
		switch {
		case tc.bad == "" && len(problems) > 0:
			t.Errorf("%s: unexpected problems %v", tc.expr, problems)
		case tc.bad != "" && !contains(problems, tc.bad):
			t.Errorf("%s: problems %v, want %q", tc.expr, problems, tc.bad)
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestExportedFamilies checks the metric set the other tests compare
// against is telemetry's, with types and labels.
func TestExportedFamilies(t *testing.T) {
	fams := exportedFamilies(t)
	for name, want := range map[string]struct {
		typ    dto.MetricType
		labels string
	}{
		"wrench_tasks_finished_total":         {dto.MetricType_COUNTER, "status"},
		"wrench_task_phase_duration_seconds":  {dto.MetricType_HISTOGRAM, "phase"},
		"wrench_model_tokens_total":           {dto.MetricType_COUNTER, "model,type"},
		"wrench_tool_calls_total":             {dto.MetricType_COUNTER, "outcome,tool"},
		"wrench_consumer_pending_messages":    {dto.MetricType_GAUGE, ""},
		"wrench_sandbox_start_failures_total": {dto.MetricType_COUNTER, ""},
		"process_resident_memory_bytes":       {dto.MetricType_GAUGE, ""},
	} {
		f, ok := fams[name]
		if !ok {
			t.Errorf("%s is not exported", name)
			continue
		}
		var labels []string
		for l := range f.labels {
			labels = append(labels, l)
		}
		sort.Strings(labels)
		if f.typ != want.typ || strings.Join(labels, ",") != want.labels {
			t.Errorf("%s: %v {%s}, want %v {%s}", name, f.typ, strings.Join(labels, ","), want.typ, want.labels)
		}
	}
}
