package telemetry

import "github.com/prometheus/client_golang/prometheus"

// agentMetrics are the metrics of what agents do: model use (the model
// label bounded by maxModelLabels), tool calls, sandboxes, checkpoints and
// rollbacks.
type agentMetrics struct {
	modelRequests   *prometheus.CounterVec
	modelTokens     *prometheus.CounterVec
	modelCost       *prometheus.CounterVec
	toolCalls       *prometheus.CounterVec
	sandboxStarts   prometheus.Counter
	sandboxFailures prometheus.Counter
	checkpoints     prometheus.Counter
	rollbacks       prometheus.Counter
	models          *labelSet
}

func newAgentMetrics() agentMetrics {
	return agentMetrics{
		modelRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "model_requests_total",
			Help: "Model (chat) requests, by model.",
		}, []string{"model"}),
		modelTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "model_tokens_total",
			Help: "Model tokens, by model and type (input, output).",
		}, []string{"model", "type"}),
		modelCost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "model_cost_usd_total",
			Help: "Model spend in US dollars, by model.",
		}, []string{"model"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "tool_calls_total",
			Help: "Agent tool calls, by tool and outcome (ok, error).",
		}, []string{"tool", "outcome"}),
		sandboxStarts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "sandbox_starts_total",
			Help: "Sandbox start attempts.",
		}),
		sandboxFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "sandbox_start_failures_total",
			Help: "Sandbox start attempts that failed.",
		}),
		checkpoints: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "checkpoints_total",
			Help: "Verified checkpoints made by agents.",
		}),
		rollbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "rollbacks_total",
			Help: "Rollbacks to a checkpoint after a verification regressed.",
		}),
		models: newLabelSet(maxModelLabels),
	}
}

func (a agentMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{a.modelRequests, a.modelTokens, a.modelCost, a.toolCalls,
		a.sandboxStarts, a.sandboxFailures, a.checkpoints, a.rollbacks}
}

// benchMetrics are the metrics of graded bench tasks (the run label
// bounded like the model label).
type benchMetrics struct {
	benchTasks *prometheus.CounterVec
	benchCost  *prometheus.CounterVec
	benchRuns  *labelSet
}

func newBenchMetrics() benchMetrics {
	return benchMetrics{
		benchTasks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "bench_tasks_total",
			Help: "Graded bench tasks, by bench run, model and outcome (resolved, model, infrastructure).",
		}, []string{"run", "model", "outcome"}),
		benchCost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "bench_cost_usd_total",
			Help: "Model spend of graded bench tasks in US dollars, by bench run and model.",
		}, []string{"run", "model"}),
		benchRuns: newLabelSet(maxModelLabels),
	}
}

func (b benchMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{b.benchTasks, b.benchCost}
}
