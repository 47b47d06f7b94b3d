package agent

import (
	"github.com/wrenchworks/wrench/task"
)

// Plan-then-execute: with Run.PlanFirst the run
// starts with the read-only tools; the model investigates and calls finish
// with its plan, which ends the planning phase instead of the run. Every
// tool is then offered, the plan stays in the history (and in
// Outcome.Plan), and the model carries it out. Limits span both phases.

const planRecorded = "Plan recorded. The planning phase is over and every tool is available now: carry out the plan step by step, check your work, and call finish when the task is done."

// endPlanning switches a planning run to execution. It returns why calls
// after finish in the same reply are not run.
func (s *runState) endPlanning(res *toolResult) string {
	s.planning = false
	s.plan = res.summary
	tools, err := s.a.toolSet(s.r.Mode, s.r.AllowedTools)
	if err == nil { // validated in newState
		s.setTools(tools)
	}
	s.traj.write(Record{Kind: RecordPlan, Turn: s.turn, Note: res.summary})
	s.emit(task.Event{Kind: task.EventPhase, Phase: "execute", Text: "plan made"})
	res.output = planRecorded
	res.display = "plan: " + res.summary
	return "the plan was recorded by finish earlier in this reply; make these calls again now if you still need them."
}

// setTools replaces the tools offered to the model.
func (s *runState) setTools(defs []*toolDef) {
	s.tools.offer(defs, s.modeName())
	s.specs = nil
	if !s.textMode {
		s.specs = specsOf(defs)
	}
}
