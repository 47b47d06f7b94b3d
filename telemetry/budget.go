package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wrenchworks/wrench/task"
)

// budgetScopes are the scope label's values: whose daily budget.
var budgetScopes = []string{task.BudgetRepository, task.BudgetTenant}

// pauseReasons are the reason label's values of the paused metrics.
var pauseReasons = []string{task.ReasonBudget}

// budgetMetrics are the metrics of spend caps above the task: what the
// budgeted model calls spent, which calls the caps refused, which tasks
// wait for them. Labels are bounded: scope and reason, never an
// account's name.
type budgetMetrics struct {
	spent        *prometheus.CounterVec
	refused      *prometheus.CounterVec
	paused       *prometheus.CounterVec
	pausedNow    *prometheus.GaugeVec
	budgetResume *prometheus.CounterVec
}

func newBudgetMetrics() budgetMetrics {
	b := budgetMetrics{
		spent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "budget_spent_usd_total",
			Help: "Model spend in US dollars settled on daily budget accounts, by scope (repository, tenant): a call on a repository and a tenant budget counts in both.",
		}, []string{"scope"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "budget_refusals_total",
			Help: "Model calls not made because their worst-case cost would cross a daily budget, by the scope of the budget (repository, tenant).",
		}, []string{"scope"}),
		paused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "tasks_paused_total",
			Help: "Attempts that ended with the task paused, by reason (budget), their work kept for when it continues.",
		}, []string{"reason"}),
		pausedNow: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "tasks_paused",
			Help: "Tasks paused now, by reason (budget), as serve's sweeper last counted them (every minute).",
		}, []string{"reason"}),
		budgetResume: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "tasks_resumed_total",
			Help: "Paused tasks queued again, by how: budget (the sweeper found their budget allows them again: a raised cap or a new day) or manual (wrench resume).",
		}, []string{"how"}),
	}
	for _, s := range budgetScopes {
		b.spent.WithLabelValues(s)
		b.refused.WithLabelValues(s)
	}
	for _, r := range pauseReasons {
		b.paused.WithLabelValues(r)
	}
	for _, h := range []string{ResumedByBudget, ResumedByHand} {
		b.budgetResume.WithLabelValues(h)
	}
	return b
}

// How paused tasks were resumed, the how label of wrench_tasks_resumed_total.
const (
	ResumedByBudget = "budget"
	ResumedByHand   = "manual"
)

func (b budgetMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{b.spent, b.refused, b.paused, b.pausedNow, b.budgetResume}
}

// BudgetSpent counts usd settled on an account of scope.
func (m *Metrics) BudgetSpent(scope string, usd float64) {
	if usd > 0 {
		m.spent.WithLabelValues(boundedScope(scope)).Add(usd)
	}
}

// BudgetRefused counts a model call an account of scope refused.
func (m *Metrics) BudgetRefused(scope string) {
	m.refused.WithLabelValues(boundedScope(scope)).Inc()
}

// TaskPaused counts an attempt that paused its task for reason.
func (m *Metrics) TaskPaused(reason string) {
	m.paused.WithLabelValues(boundedPause(reason)).Inc()
}

// SetPaused records how many tasks are paused for reason now.
func (m *Metrics) SetPaused(reason string, n int) {
	m.pausedNow.WithLabelValues(boundedPause(reason)).Set(float64(n))
}

// TasksResumed counts n paused tasks queued again, how (ResumedByBudget,
// ResumedByHand).
func (m *Metrics) TasksResumed(how string, n int) {
	if how != ResumedByHand {
		how = ResumedByBudget
	}
	m.budgetResume.WithLabelValues(how).Add(float64(n))
}

func boundedScope(s string) string {
	if s == task.BudgetTenant {
		return s
	}
	return task.BudgetRepository
}

func boundedPause(string) string { return task.ReasonBudget }
