package agent

import (
	"fmt"
	"slices"
	"strings"

	"github.com/wrenchworks/wrench/task"
)

// ToolNames returns the name of every built-in tool, the optional ones
// included, sorted.
func ToolNames() []string {
	names := slices.Clone(toolOrder)
	slices.Sort(names)
	return names
}

// CheckTask reports what in a task no run of this agent could accept — a
// tool name that is not a tool, a text protocol without the bash tool, a
// plan-first run that cannot plan — as a *task.ValidationError naming the
// task's fields (allowed_tools[i], protocol, plan_first). It is meant for
// where tasks come in (the API, the webhook, wrench run and submit), so bad
// input is rejected at submission rather than failed by a worker; Run
// refuses the same tasks with ErrInvalidRun. It does what task.Validate
// cannot, since the task package does not know the agent's tools.
func CheckTask(t *task.Task) error {
	var errs []task.FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, task.FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	for i, name := range t.AllowedTools {
		if registry[name] == nil {
			add(fmt.Sprintf("allowed_tools[%d]", i), "%q is not a tool (tools: %s)", name, strings.Join(ToolNames(), ", "))
		}
	}
	if t.Protocol == task.ProtocolText {
		switch {
		case t.Mode == task.ModePlan:
			add("protocol", "the text protocol needs the bash tool, which plan mode does not offer")
		case len(t.AllowedTools) > 0 && !slices.Contains(t.AllowedTools, ToolBash):
			add("protocol", "the text protocol needs the bash tool, which allowed_tools leaves out")
		}
	}
	if t.PlanFirst && (t.Mode == task.ModePlan || t.Protocol == task.ProtocolText) {
		add("plan_first", "needs the tools protocol and normal mode (a plan mode run only plans)")
	}
	if len(errs) > 0 {
		return &task.ValidationError{Fields: errs}
	}
	return nil
}
