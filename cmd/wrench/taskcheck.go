package main

import (
	"errors"
	"strings"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/task"
)

// runFlagOf names the wrench run flag that sets each task field, so bad
// input is reported in the words the user typed.
var runFlagOf = map[string]string{
	"allowed_tools": "--tools", "protocol": "--protocol", "plan_first": "--plan-first", "mode": "--mode",
	"instruction": "--task", "repo.url": "--repo", "repo.ref": "--ref", "repo.commit": "--commit",
	"limits.max_turns": "--max-turns", "limits.max_cost_usd": "--max-cost", "limits.max_tokens": "--max-tokens",
	"limits.timeout": "--timeout", "sandbox.network": "--network", "model": "--model", "image": "--image",
}

// checkTask runs the checks a task gets where it comes in: task.Validate
// and what only the agent knows (agent.CheckTask: tool names, protocol and
// plan rules). With flagOf, field names become the flags that set them.
func checkTask(t *task.Task, flagOf map[string]string) error {
	err := t.Validate()
	if err == nil {
		err = agent.CheckTask(t)
	}
	var ve *task.ValidationError
	if flagOf == nil || !errors.As(err, &ve) {
		return err
	}
	out := &task.ValidationError{Fields: make([]task.FieldError, len(ve.Fields))}
	for i, f := range ve.Fields {
		base, _, _ := strings.Cut(f.Field, "[")
		if flag, ok := flagOf[base]; ok {
			f.Field = flag
		}
		out.Fields[i] = f
	}
	return out
}
