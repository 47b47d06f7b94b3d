package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
)

// execOutputCap is what the agent asks the environment to return of a
// command's output; the model sees at most Config.MaxOutputChars of it.
const execOutputCap = 1 << 20

// displayChars caps what people are shown of a long tool output.
const displayChars = 2000

var bashTool = &toolDef{
	name: ToolBash,
	desc: "Run a shell command (bash -c) in the workspace and return its exit code and combined stdout and stderr. Each call is a fresh shell: cd and exported variables do not persist. Long output keeps its head and tail; narrow the command (grep, head, tail) when it is cut. The sandbox has no network unless the task allows it.",
	params: `{"type":"object","properties":{` +
		`"command":{"type":"string","description":"the command line"},` +
		`"timeout_s":{"type":"number","description":"timeout in seconds (default 120)"}},` +
		`"required":["command"]}`,
	required: []string{"command"},
	bind: func(k *toolKit) tool {
		return &bash{exec: k.env, approve: k.approve, timeout: k.cfg.CommandTimeout, maxTimeout: k.cfg.MaxCommandTimeout, maxOutput: k.cfg.MaxOutputChars}
	},
}

// bash runs shell commands in the workspace.
type bash struct {
	exec       sandbox.Execer
	approve    approveFunc // nil: nobody asked
	timeout    time.Duration
	maxTimeout time.Duration
	maxOutput  int
}

func (t *bash) run(ctx context.Context, call ToolCall, raw json.RawMessage) toolResult {
	a, bad := args[struct {
		Command  string  `json:"command"`
		TimeoutS float64 `json:"timeout_s"`
	}](ToolBash, raw)
	if bad != nil {
		return *bad
	}
	if strings.TrimSpace(a.Command) == "" {
		return formatError("bash needs a non-empty command.")
	}
	timeout := t.timeout
	if a.TimeoutS > 0 {
		timeout = min(time.Duration(a.TimeoutS*float64(time.Second)), t.maxTimeout)
	}
	if t.approve != nil {
		if r := t.approve(ctx, ApprovalRequest{Call: call, Command: a.Command}); r != nil {
			return *r
		}
	}
	res, err := t.exec.Exec(ctx, sandbox.ExecRequest{Command: a.Command, Timeout: timeout, MaxOutput: execOutputCap})
	if err != nil {
		if ctx.Err() != nil {
			return interrupted(ctx)
		}
		return toolResult{fatal: fmt.Errorf("exec: %w", errors.Join(ErrEnvFailed, err)), output: "Error: the environment failed", isError: true}
	}
	return toolResult{
		output:   formatExec(res, timeout, t.maxOutput),
		display:  formatExec(res, timeout, displayChars),
		isError:  res.ExitCode != 0 || res.TimedOut,
		mayWrite: true,
		exec:     &res,
		cmd:      a.Command,
	}
}

// formatExec renders a command result for the model: a status line with
// the exit code and, on failure, the error class, then the output verbatim
// (head and tail kept).
func formatExec(res sandbox.ExecResult, timeout time.Duration, maxChars int) string {
	var b strings.Builder
	switch {
	case res.TimedOut:
		fmt.Fprintf(&b, "Command timed out after %s and was killed (error class: %s). Use a longer timeout_s or a quicker command.\n", timeout, ClassTimeout)
	case res.ExitCode != 0:
		fmt.Fprintf(&b, "Exit code: %d (error class: %s)\n", res.ExitCode, ClassifyError(string(res.Output), res.ExitCode, false))
	default:
		b.WriteString("Exit code: 0\n")
	}
	if len(res.Output) == 0 && res.Dropped == 0 {
		b.WriteString("(no output)")
	} else {
		b.WriteString(capOutput(string(res.Output), maxChars, res.Dropped))
	}
	return strings.TrimRight(b.String(), "\n")
}

var finishTool = &toolDef{
	name: ToolFinish,
	desc: "End the task. Call it once the work is done (and checked), with a short summary of what you changed and why. If the task's tests still fail you will be told and may continue.",
	params: `{"type":"object","properties":{` +
		`"summary":{"type":"string","description":"what you changed and why"}},` +
		`"required":["summary"]}`,
	required: []string{"summary"},
	readOnly: true,
	bind:     func(*toolKit) tool { return finish{} },
}

// finish ends the task with the model's summary; the loop decides whether
// it may (verification, the plan phase).
type finish struct{}

func (finish) run(_ context.Context, _ ToolCall, raw json.RawMessage) toolResult {
	a, bad := args[struct {
		Summary string `json:"summary"`
	}](ToolFinish, raw)
	if bad != nil {
		return *bad
	}
	return toolResult{output: "Finished.", finish: true, summary: a.Summary}
}
