package deploytest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// dashboardQuery is one PromQL query of the dashboard and where it is.
type dashboardQuery struct {
	where, expr, legend string
}

func loadDashboard(t *testing.T) (map[string]any, []dashboardQuery) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir(t), "grafana", "wrench-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("wrench-dashboard.json: %v", err)
	}
	var qs []dashboardQuery
	var walk func(panels []any)
	walk = func(panels []any) {
		for _, p := range panels {
			for _, tg := range list(p, "targets") {
				qs = append(qs, dashboardQuery{where: "panel " + str(p, "title"), expr: str(tg, "expr"), legend: str(tg, "legendFormat")})
			}
			walk(list(p, "panels"))
		}
	}
	walk(list(d, "panels"))
	labelValues := regexp.MustCompile(`^label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)
	for _, v := range list(d, "templating", "list") {
		if str(v, "type") != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(str(v, "definition"))
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(metric, label)", str(v, "name"), str(v, "definition"))
			continue
		}
		// label_values(m, l) needs l on m: check it as a grouping.
		qs = append(qs, dashboardQuery{where: "variable " + str(v, "name"), expr: "max by (" + m[2] + ") (" + m[1] + ")"})
	}
	return d, qs
}

// TestDashboardMetricsExist checks every query of the Grafana dashboard
// against the metrics the telemetry package exports: names (histogram
// series with their suffixes), selector labels, grouping labels, and the
// labels legends print.
func TestDashboardMetricsExist(t *testing.T) {
	fams := exportedFamilies(t)
	_, qs := loadDashboard(t)
	if len(qs) < 20 {
		t.Fatalf("only %d queries found in the dashboard", len(qs))
	}
	legendLabel := regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)
	for _, q := range qs {
		for _, p := range checkQuery(fams, q.expr) {
			t.Errorf("%s: %s\n  %s", q.where, p, q.expr)
		}
		u := parsePromQL(q.expr)
		for _, m := range legendLabel.FindAllStringSubmatch(q.legend, -1) {
			l := m[1]
			if len(u.grouped) > 0 {
				if !u.grouped[l] {
					t.Errorf("%s: legend %q prints %s, which the query aggregates away", q.where, q.legend, l)
				}
				continue
			}
			ok := false
			for name := range u.metrics {
				if labels, found := seriesLabels(fams, name); found && labels[l] {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s: legend %q prints %s, which its series lack", q.where, q.legend, l)
			}
		}
	}
}

// TestDashboardCoversTheOperatorsQuestions checks the dashboard shows what
// operators are promised in docs/operations.md.
func TestDashboardCoversTheOperatorsQuestions(t *testing.T) {
	_, qs := loadDashboard(t)
	used := map[string]bool{}
	for _, q := range qs {
		for m := range parsePromQL(q.expr).metrics {
			used[m] = true
		}
	}
	for _, m := range []string{
		"wrench_tasks_finished_total",                 // tasks by status
		"wrench_task_phase_duration_seconds_bucket",   // phase p50/p95
		"wrench_tasks_in_flight",                      // in flight
		"wrench_worker_free_slots",                    // free slots
		"wrench_consumer_pending_messages",            // lag
		"wrench_task_redeliveries_total",              // redeliveries
		"wrench_dead_letters_total",                   // dead letters
		"wrench_model_tokens_total",                   // tokens by model
		"wrench_model_cost_usd_total",                 // cost by model
		"wrench_tool_calls_total",                     // tool calls by tool and outcome
		"wrench_sandbox_starts_total",                 // sandbox starts
		"wrench_sandbox_start_failures_total",         // and failures
		"wrench_http_request_duration_seconds_bucket", // API latency
	} {
		if !used[m] {
			t.Errorf("the dashboard does not query %s", m)
		}
	}
}

// TestDashboardShape checks what Grafana needs to import it anywhere: a
// uid, a datasource variable every query uses, unique panel ids, and a
// layout inside the 24-column grid.
func TestDashboardShape(t *testing.T) {
	d, _ := loadDashboard(t)
	if str(d, "uid") == "" || str(d, "title") == "" {
		t.Error("dashboard lacks uid or title")
	}
	hasDS := false
	for _, v := range list(d, "templating", "list") {
		if str(v, "type") == "datasource" && str(v, "query") == "prometheus" && str(v, "name") == "datasource" {
			hasDS = true
		}
	}
	if !hasDS {
		t.Error("no datasource variable of type prometheus named datasource")
	}
	ids := map[float64]bool{}
	var walk func(panels []any)
	walk = func(panels []any) {
		for _, p := range panels {
			id, _ := get(p, "id").(float64)
			if ids[id] {
				t.Errorf("panel id %v used twice", id)
			}
			ids[id] = true
			x, _ := get(p, "gridPos", "x").(float64)
			w, _ := get(p, "gridPos", "w").(float64)
			if w <= 0 || x+w > 24 {
				t.Errorf("panel %q: gridPos x %v w %v leaves the 24-column grid", str(p, "title"), x, w)
			}
			if str(p, "type") != "row" {
				if str(p, "datasource", "uid") != "${datasource}" {
					t.Errorf("panel %q does not use the datasource variable", str(p, "title"))
				}
				if len(list(p, "targets")) == 0 {
					t.Errorf("panel %q has no query", str(p, "title"))
				}
				if strings.TrimSpace(str(p, "description")) == "" {
					t.Errorf("panel %q has no description", str(p, "title"))
				}
			}
			walk(list(p, "panels"))
		}
	}
	walk(list(d, "panels"))
}
