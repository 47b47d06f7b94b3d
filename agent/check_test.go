package agent_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/task"
)

func TestCheckTask(t *testing.T) {
	for _, tc := range []struct {
		name   string
		t      task.Task
		fields []string
	}{
		{"every tool", task.Task{AllowedTools: agent.ToolNames()}, nil},
		{"a typo", task.Task{AllowedTools: []string{"view", "bsh", "grpe"}}, []string{"allowed_tools[1]", "allowed_tools[2]"}},
		{"text protocol without bash", task.Task{Protocol: task.ProtocolText, AllowedTools: []string{"view"}}, []string{"protocol"}},
		{"text protocol in plan mode", task.Task{Protocol: task.ProtocolText, Mode: task.ModePlan}, []string{"protocol"}},
		{"text protocol with bash", task.Task{Protocol: task.ProtocolText, AllowedTools: []string{"bash"}}, nil},
		{"plan first in plan mode", task.Task{PlanFirst: true, Mode: task.ModePlan}, []string{"plan_first"}},
		{"plan first", task.Task{PlanFirst: true}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := agent.CheckTask(&tc.t)
			var ve *task.ValidationError
			if tc.fields == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if !errors.As(err, &ve) {
				t.Fatalf("want a *task.ValidationError, got %v", err)
			}
			var got []string
			for _, f := range ve.Fields {
				got = append(got, f.Field)
			}
			if strings.Join(got, ",") != strings.Join(tc.fields, ",") {
				t.Errorf("fields %v, want %v (%v)", got, tc.fields, err)
			}
		})
	}
	err := agent.CheckTask(&task.Task{AllowedTools: []string{"bsh"}})
	if err == nil || !strings.Contains(err.Error(), `"bsh" is not a tool (tools: bash, edit,`) {
		t.Errorf("message does not list the tools: %v", err)
	}
}
