package telemetry

import (
	"strings"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/task"
)

// knownTools are the agent's tool names (agent/tools.go: the built-in
// tools, the optional search and research tools included). Any other name a model invents
// is counted as "other".
var knownTools = map[string]bool{
	agent.ToolBash: true, agent.ToolView: true, agent.ToolLs: true, agent.ToolGlob: true,
	agent.ToolGrep: true, agent.ToolEdit: true, agent.ToolWrite: true, agent.ToolPatch: true,
	agent.ToolSearchReplace: true, agent.ToolFinish: true, agent.ToolSearch: true, agent.ToolResearch: true,
}

// The phase names a worker reports in phase events.
const (
	// EventPhaseSandbox is the phase event that starts a task's sandbox.
	EventPhaseSandbox = "sandbox"
)

// PhaseStarting reports whether a phase event marks the start of its phase.
// The worker emits a phase event with Text " start" when a phase begins and
// one with Text " end" (or " failed: …" with IsError set) when it ends;
// surrounding space is ignored. Any other phase event is a point in time
// (e.g. the agent's in-loop "verify" with its trigger).
func PhaseStarting(ev task.Event) bool {
	switch strings.ToLower(strings.TrimSpace(ev.Text)) {
	case "start", "started", "begin":
		return true
	}
	return false
}

// ObserveEvent counts what a task's event reports:
//   - tool_result: wrench_tool_calls_total{tool, outcome}
//   - usage (one per model call; Usage holds that call's figures, Model its
//     model): wrench_model_requests_total, wrench_model_tokens_total,
//     wrench_model_cost_usd_total
//   - phase "sandbox" end: wrench_sandbox_starts_total, and
//     wrench_sandbox_start_failures_total when IsError
//   - checkpoint, rollback: wrench_checkpoints_total, wrench_rollbacks_total
//   - egress: wrench_egress_connections_total, wrench_egress_bytes_total
//
// Other kinds are ignored.
func (m *Metrics) ObserveEvent(ev task.Event) {
	switch ev.Kind {
	case task.EventToolResult:
		tool := ev.Tool
		if !knownTools[tool] {
			tool = "other"
		}
		outcome := "ok"
		if ev.IsError {
			outcome = "error"
		}
		m.toolCalls.WithLabelValues(tool, outcome).Inc()
	case task.EventUsage:
		model := m.modelLabel(ev.Model)
		calls := 1
		if ev.Usage != nil && ev.Usage.ModelCalls > 1 {
			calls = ev.Usage.ModelCalls
		}
		m.modelRequests.WithLabelValues(model).Add(float64(calls))
		if u := ev.Usage; u != nil {
			m.modelTokens.WithLabelValues(model, "input").Add(float64(max(u.InputTokens, 0)))
			m.modelTokens.WithLabelValues(model, "output").Add(float64(max(u.OutputTokens, 0)))
			m.modelCost.WithLabelValues(model).Add(max(u.CostUSD, 0))
		}
	case task.EventPhase:
		if ev.Phase == EventPhaseSandbox && !PhaseStarting(ev) {
			m.sandboxStarts.Inc()
			if ev.IsError {
				m.sandboxFailures.Inc()
			}
		}
	case task.EventEgress:
		if c := ev.Egress; c != nil {
			m.EgressConnection(ev.Phase, c.Allowed, c.Rule, c.BytesUp, c.BytesDown)
		}
	case task.EventCheckpoint:
		m.checkpoints.Inc()
	case task.EventRollback:
		m.rollbacks.Inc()
	}
}
