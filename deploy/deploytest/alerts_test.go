package deploytest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"
)

// The alert rules' promtool unit tests (deploy/prometheus/
// wrench-rules.test.yaml) are generated here from what a fresh `wrench
// serve` really exports: its /metrics is scraped, the series of the
// families the rules use become every test case's starting point (for two
// instances), and each case changes only those series over time. A series
// a fresh process does not export cannot be changed, except for families
// whose labels no process can know in advance (the model), which appear
// when first used. So a rule that waits on a series that only appears
// after its first event is caught: its case starts without it and never
// fires.

// liveScrape starts `wrench serve` on a data directory of its own, waits
// until it serves, scrapes /metrics once and stops it.
func liveScrape(t *testing.T) string {
	t.Helper()
	needDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, wrenchBinary(t), "serve", "--http", "127.0.0.1:0", "--slots", "2",
		"--data-dir", t.TempDir(), "--log-level", "error")
	cmd.Env = filteredEnv("WRENCH_", "OTEL_")
	stderr, err := cmd.StderrPipe()
	must(t, err)
	must(t, cmd.Start())
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	var base string
	var lines []string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if u, ok := strings.CutPrefix(sc.Text(), "wrench serve: API on "); ok {
			base, _, _ = strings.Cut(u, " ")
			break
		}
	}
	if base == "" {
		t.Fatalf("serve did not start:\n%s", strings.Join(lines, "\n"))
	}
	go io.Copy(io.Discard, stderr)
	waitReady(ctx, t, base+"/readyz")
	resp, err := http.Get(base + "/metrics")
	must(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	must(t, err)
	return string(body)
}

// seriesKey is a series as PromQL writes it: name{a="x",b="y"}, labels
// sorted.
func seriesKey(name string, labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%q", k, labels[k]))
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

// parseScrape returns the scrape's samples by series key, for the given
// families only.
func parseScrape(t *testing.T, text string, families map[string]bool) map[string]float64 {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(text))
	must(t, err)
	out := map[string]float64{}
	for name, mf := range mfs {
		if !families[name] {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			var v float64
			switch {
			case m.GetCounter() != nil:
				v = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				v = m.GetGauge().GetValue()
			default:
				t.Fatalf("%s: the rules use only counters and gauges", name)
			}
			out[seriesKey(name, labels)] = v
		}
	}
	return out
}

// ruleFamilies are the metric names the alert expressions and their
// annotation queries use.
func ruleFamilies(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir(t), "prometheus", "wrench-rules.yaml"))
	must(t, err)
	out := map[string]bool{"up": true}
	for _, m := range regexp.MustCompile(`\bwrench_[a-z_]+`).FindAllString(string(raw), -1) {
		out[m] = true
	}
	return out
}

// change alters one series of one instance from minute `from` on: to
// value set, then by perMinute every minute (until minute until, when not
// zero).
type change struct {
	instance  string
	series    string // name{labels} without job and instance, as parseScrape keys it
	from      int
	set       *float64
	perMinute float64
	until     int
	// appears lets the case create a series the fresh process does not
	// export: only for families labelled by model, which no process knows
	// before the first request.
	appears bool
}

func val(v float64) *float64 { return &v }

// alertEval is one evaluation of a case: whether the alert fires, and its
// description then.
type alertEval struct {
	at          int
	fires       bool
	description string
	labels      map[string]string // beyond severity (WrenchDown keeps job and instance)
}

// alertCase is one promtool test case.
type alertCase struct {
	comment string
	alert   string
	minutes int
	changes []change
	evals   []alertEval
}

// instances of every case: two fresh processes.
var instances = []string{"w1:7070", "w2:7070"}

// alertCases are the situations each alert is for, and its healthy
// neighbours, as changes of a fresh process's series.
func alertCases() []alertCase {
	fin := func(status string) string { return `wrench_tasks_finished_total{status="` + status + `"}` }
	return []alertCase{
		{
			comment: "Dead letters: firing once the counter moves, silent again 15 minutes later.",
			alert:   "WrenchDeadLetters", minutes: 45,
			changes: []change{{instance: "w1:7070", series: "wrench_dead_letters_total{}", from: 20, set: val(1)}},
			evals: []alertEval{{at: 15}, {at: 25, fires: true, description: "1 task(s) ran out of deliveries in the last 15 minutes and were moved to the WRENCH_DEADLETTER stream; they will not run again unless resubmitted."},
				{at: 40}},
		},
		{
			comment: "No free slots while 3 tasks wait (each process reports the same queue: max, not sum).",
			alert:   "WrenchNoFreeSlots", minutes: 35,
			changes: []change{
				{instance: "w1:7070", series: "wrench_worker_free_slots{}", from: 5, set: val(0)},
				{instance: "w2:7070", series: "wrench_worker_free_slots{}", from: 5, set: val(0)},
				{instance: "w1:7070", series: "wrench_consumer_pending_messages{}", from: 5, set: val(3)},
				{instance: "w2:7070", series: "wrench_consumer_pending_messages{}", from: 5, set: val(3)},
			},
			evals: []alertEval{{at: 10}, {at: 20, fires: true, description: "No wrench process has had a free slot for 10 minutes while 3 task(s) wait in the queue. Add workers or slots, or look for stuck tasks."}},
		},
		{
			comment: "Busy but nothing waits: no alert.",
			alert:   "WrenchNoFreeSlots", minutes: 30,
			changes: []change{
				{instance: "w1:7070", series: "wrench_worker_free_slots{}", from: 0, set: val(0)},
				{instance: "w2:7070", series: "wrench_worker_free_slots{}", from: 0, set: val(0)},
			},
			evals: []alertEval{{at: 25}},
		},
		{
			comment: "Failure ratio: 4 of 8 tasks in 30 minutes failed or timed out.",
			alert:   "WrenchTaskFailureRatioHigh", minutes: 50,
			changes: []change{
				{instance: "w1:7070", series: fin("resolved"), from: 11, set: val(1)},
				{instance: "w1:7070", series: fin("resolved"), from: 21, set: val(2)},
				{instance: "w1:7070", series: fin("resolved"), from: 31, set: val(4)},
				{instance: "w1:7070", series: fin("failed"), from: 11, set: val(1)},
				{instance: "w1:7070", series: fin("failed"), from: 21, set: val(2)},
				{instance: "w1:7070", series: fin("failed"), from: 31, set: val(3)},
				{instance: "w1:7070", series: fin("timed_out"), from: 31, set: val(1)},
			},
			evals: []alertEval{{at: 15}, {at: 40, fires: true, description: "50% of the tasks that finished in the last 30 minutes failed or timed out."}},
		},
		{
			comment: "Unresolved tasks are not an operations problem.",
			alert:   "WrenchTaskFailureRatioHigh", minutes: 40,
			changes: []change{{instance: "w1:7070", series: fin("unresolved"), from: 1, set: val(1), perMinute: 1}},
			evals:   []alertEval{{at: 40}},
		},
		{
			comment: "Sandbox start failures: every start fails from minute 5 on.",
			alert:   "WrenchSandboxStartFailures", minutes: 20,
			changes: []change{
				{instance: "w1:7070", series: "wrench_sandbox_starts_total{}", from: 1, set: val(1), perMinute: 1},
				{instance: "w1:7070", series: "wrench_sandbox_start_failures_total{}", from: 6, set: val(1), perMinute: 1},
			},
			evals: []alertEval{{at: 4}, {at: 15, fires: true, description: "10 sandbox start(s) failed in the last 10 minutes. The Docker engine may be down, out of space, or missing the sandbox image."}},
		},
		{
			comment: "One failure among many starts: no alert.",
			alert:   "WrenchSandboxStartFailures", minutes: 20,
			changes: []change{
				{instance: "w1:7070", series: "wrench_sandbox_starts_total{}", from: 1, set: val(5), perMinute: 5},
				{instance: "w1:7070", series: "wrench_sandbox_start_failures_total{}", from: 11, set: val(1)},
			},
			evals: []alertEval{{at: 15}},
		},
		{
			comment: "Stuck: from minute 5 two tasks run and nothing finishes or is handed back: an hour later, for 15 minutes, the alert fires.",
			alert:   "WrenchTasksStuck", minutes: 90,
			changes: []change{{instance: "w1:7070", series: "wrench_tasks_in_flight{}", from: 5, set: val(2)}},
			evals:   []alertEval{{at: 60}, {at: 75}, {at: 81, fires: true, description: "2 task(s) are running and no task finished or was handed back in the last hour."}},
		},
		{
			comment: "Tasks keep finishing: not stuck.",
			alert:   "WrenchTasksStuck", minutes: 90,
			changes: []change{
				{instance: "w1:7070", series: "wrench_tasks_in_flight{}", from: 5, set: val(2)},
				{instance: "w1:7070", series: fin("resolved"), from: 6, set: val(1), perMinute: 1},
			},
			evals: []alertEval{{at: 85}},
		},
		{
			comment: "A task handed back (a retry) in the last hour: not stuck.",
			alert:   "WrenchTasksStuck", minutes: 90,
			changes: []change{
				{instance: "w1:7070", series: "wrench_tasks_in_flight{}", from: 5, set: val(2)},
				{instance: "w1:7070", series: `wrench_task_requeues_total{reason="retry"}`, from: 50, set: val(1)},
			},
			evals: []alertEval{{at: 85}},
		},
		{
			comment: "Redeliveries: 12 in 30 minutes.",
			alert:   "WrenchRedeliveries", minutes: 40,
			changes: []change{{instance: "w1:7070", series: "wrench_task_redeliveries_total{}", from: 11, set: val(1), perMinute: 1, until: 22}},
			evals:   []alertEval{{at: 5}, {at: 30, fires: true, description: "12 task deliveries in the last 30 minutes were retries (a worker crashed, lost its lease, or asked for a retry after an infrastructure fault)."}},
		},
		{
			comment: "A process that stops answering scrapes.",
			alert:   "WrenchDown", minutes: 15,
			changes: []change{{instance: "w1:7070", series: "up{}", from: 6, set: val(0)}},
			evals: []alertEval{{at: 5}, {at: 12, fires: true, description: "w1:7070 (job wrench) has been down for 5 minutes.",
				labels: map[string]string{"job": "wrench", "instance": "w1:7070"}}},
		},
		{
			comment: "Spend: 60 USD in an hour across two models (the series appear with the first request).",
			alert:   "WrenchModelSpendHigh", minutes: 60,
			changes: []change{
				{instance: "w1:7070", series: `wrench_model_cost_usd_total{model="gpt-4.1"}`, from: 0, set: val(0), perMinute: 0.5, appears: true},
				{instance: "w2:7070", series: `wrench_model_cost_usd_total{model="other"}`, from: 0, set: val(0), perMinute: 0.5, appears: true},
			},
			evals: []alertEval{{at: 30}, {at: 60, fires: true, description: "Tasks spent 60 USD on models in the last hour."}},
		},
	}
}

// withInstance adds job and instance to a series key.
func withInstance(series, instance string) string {
	name, labels, _ := strings.Cut(strings.TrimSuffix(series, "}"), "{")
	parts := []string{`instance="` + instance + `"`, `job="wrench"`}
	if labels != "" {
		parts = append(parts, strings.Split(labels, ",")...)
	}
	sort.Strings(parts)
	return name + "{" + strings.Join(parts, ",") + "}"
}

// values renders per-minute samples in promtool's notation: runs of equal
// values as "vxN", missing samples as "_".
func values(samples []*float64) string {
	var out []string
	for i := 0; i < len(samples); {
		j := i
		for j+1 < len(samples) && eqSample(samples[j+1], samples[i]) {
			j++
		}
		v := "_"
		if samples[i] != nil {
			v = strconv.FormatFloat(*samples[i], 'f', -1, 64)
		}
		if j > i {
			v += "x" + strconv.Itoa(j-i)
		}
		out = append(out, v)
		i = j + 1
	}
	return strings.Join(out, " ")
}

func eqSample(a, b *float64) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// promtoolTests builds the promtool test file for cases over the fresh
// series. Every case starts from all of them.
func promtoolTests(t *testing.T, fresh map[string]float64, rules ruleFile, cases []alertCase) []byte {
	t.Helper()
	type rule struct{ severity, summary, runbook string }
	byAlert := map[string]rule{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			byAlert[r.Alert] = rule{r.Labels["severity"], r.Annotations["summary"], r.Annotations["runbook_url"]}
		}
	}
	fams := exportedFamilies(t)
	var doc strings.Builder
	doc.WriteString(`# Unit tests of wrench-rules.yaml: promtool test rules wrench-rules.test.yaml
# GENERATED by deploy/deploytest (alerts_test.go, go test -run TestAlertRuleTests -update)
# from the /metrics of a fresh wrench serve: every case starts from the
# series such a process exports (for instances w1 and w2) and changes only
# those. Edit the cases there, not this file.
rule_files:
  - wrench-rules.yaml
evaluation_interval: 1m
tests:
`)
	for _, c := range cases {
		samples := map[string][]*float64{}
		for _, inst := range instances {
			for s, v := range fresh {
				line := make([]*float64, c.minutes+1)
				for i := range line {
					line[i] = val(v)
				}
				samples[withInstance(s, inst)] = line
			}
		}
		for _, ch := range c.changes {
			key := withInstance(ch.series, ch.instance)
			line, ok := samples[key]
			if !ok {
				name, _, _ := strings.Cut(ch.series, "{")
				if !ch.appears || !fams[name].labels["model"] {
					t.Fatalf("case %q changes %s, which a fresh wrench serve does not export", c.comment, key)
				}
				line = make([]*float64, c.minutes+1)
				samples[key] = line
			}
			cur := *ch.set
			for m := ch.from; m <= c.minutes; m++ {
				if ch.until == 0 || m <= ch.until {
					if m > ch.from {
						cur += ch.perMinute
					}
				}
				line[m] = val(cur)
			}
		}
		r, ok := byAlert[c.alert]
		if !ok {
			t.Fatalf("case %q: no alert %s in wrench-rules.yaml", c.comment, c.alert)
		}
		keys := make([]string, 0, len(samples))
		for k := range samples {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		doc.WriteString("\n  # " + c.comment + "\n  - interval: 1m\n    input_series:\n")
		for _, k := range keys {
			fmt.Fprintf(&doc, "      - series: '%s'\n        values: '%s'\n", k, values(samples[k]))
		}
		doc.WriteString("    alert_rule_test:\n")
		for _, e := range c.evals {
			fmt.Fprintf(&doc, "      - eval_time: %dm\n        alertname: %s\n", e.at, c.alert)
			if !e.fires {
				doc.WriteString("        exp_alerts: []\n")
				continue
			}
			labels := map[string]string{"severity": r.severity}
			for k, v := range e.labels {
				labels[k] = v
			}
			lb, _ := yaml.Marshal(map[string]any{"exp_labels": labels, "exp_annotations": map[string]string{
				"summary": r.summary, "description": e.description, "runbook_url": r.runbook}})
			doc.WriteString("        exp_alerts:\n          - ")
			doc.WriteString(strings.ReplaceAll(strings.TrimSuffix(string(lb), "\n"), "\n", "\n            "))
			doc.WriteString("\n")
		}
	}
	return []byte(doc.String())
}

// TestAlertRuleTests regenerates the promtool unit tests from a live
// scrape and compares them with deploy/prometheus/wrench-rules.test.yaml
// (-update rewrites it), then runs promtool on the result: every alert
// fires in its case, and stays silent in the healthy ones, starting from
// what a fresh process exports.
func TestAlertRuleTests(t *testing.T) {
	bin := promtool(t)
	fresh := parseScrape(t, liveScrape(t), ruleFamilies(t))
	fresh[seriesKey("up", nil)] = 1 // Prometheus's own series for a target it scraped
	rules := loadRules(t)
	cases := alertCases()
	fired := map[string]bool{}
	for _, c := range cases {
		for _, e := range c.evals {
			fired[c.alert] = fired[c.alert] || e.fires
		}
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" && !fired[r.Alert] {
				t.Errorf("alert %s has no case where it fires", r.Alert)
			}
		}
	}
	got := promtoolTests(t, fresh, rules, cases)
	file := filepath.Join(deployDir(t), "prometheus", "wrench-rules.test.yaml")
	tmp := filepath.Join(filepath.Dir(file), fmt.Sprintf(".wrench-rules.test-%d.yaml", os.Getpid()))
	must(t, os.WriteFile(tmp, got, 0o644))
	defer os.Remove(tmp)
	cmd := exec.Command(bin, "test", "rules", filepath.Base(tmp))
	cmd.Dir = filepath.Dir(file)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool test rules on the tests generated from a live scrape: %v\n%s", err, out)
	}
	if *update {
		must(t, os.WriteFile(file, got, 0o644))
		return
	}
	want, err := os.ReadFile(file)
	must(t, err)
	if string(want) != string(got) {
		t.Errorf("%s is not what a fresh process's series give; run go test -run TestAlertRuleTests -update and review.\n%s",
			file, firstDiff(string(want), string(got)))
	}
	if _, ok := fresh[`wrench_task_requeues_total{reason="retry"}`]; !ok {
		t.Error("a fresh process exports no wrench_task_requeues_total{reason=\"retry\"}: WrenchTasksStuck could never fire")
	}
}
