package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// execOutputCap is what the agent asks the environment to return of a
// command's output; the model sees at most Config.MaxOutputChars of it.
const execOutputCap = 1 << 20

// displayChars caps what people are shown of a long tool output.
const displayChars = 2000

var bashTool = &tool{
	name: ToolBash,
	desc: "Run a shell command (bash -c) in the workspace and return its exit code and combined stdout and stderr. Each call is a fresh shell: cd and exported variables do not persist. Long output keeps its head and tail; narrow the command (grep, head, tail) when it is cut. The sandbox has no network unless the task allows it.",
	params: `{"type":"object","properties":{` +
		`"command":{"type":"string","description":"the command line"},` +
		`"timeout_s":{"type":"number","description":"timeout in seconds (default 120)"}},` +
		`"required":["command"]}`,
	required: []string{"command"},
	run:      runBash,
}

func runBash(ctx context.Context, s *runState, raw json.RawMessage) toolResult {
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
	timeout := s.a.cfg.CommandTimeout
	if a.TimeoutS > 0 {
		timeout = min(time.Duration(a.TimeoutS*float64(time.Second)), s.a.cfg.MaxCommandTimeout)
	}
	if r := s.approve(ctx, ApprovalRequest{Call: s.call, Command: a.Command}); r != nil {
		return *r
	}
	res, err := s.r.Env.Exec(ctx, ExecRequest{Command: a.Command, Timeout: timeout, MaxOutput: execOutputCap})
	if err != nil {
		if ctx.Err() != nil {
			return toolResult{fatal: ctx.Err(), output: "Error: interrupted", isError: true}
		}
		return toolResult{fatal: fmt.Errorf("exec: %w", errors.Join(ErrEnvFailed, err)), output: "Error: the environment failed", isError: true}
	}
	return toolResult{
		output:   formatExec(res, timeout, s.a.cfg.MaxOutputChars),
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
func formatExec(res ExecResult, timeout time.Duration, maxChars int) string {
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

var finishTool = &tool{
	name: ToolFinish,
	desc: "End the task. Call it once the work is done (and checked), with a short summary of what you changed and why. If the task's tests still fail you will be told and may continue.",
	params: `{"type":"object","properties":{` +
		`"summary":{"type":"string","description":"what you changed and why"}},` +
		`"required":["summary"]}`,
	required: []string{"summary"},
	readOnly: true,
	run:      runFinish,
}

func runFinish(_ context.Context, _ *runState, raw json.RawMessage) toolResult {
	a, bad := args[struct {
		Summary string `json:"summary"`
	}](ToolFinish, raw)
	if bad != nil {
		return *bad
	}
	return toolResult{output: "Finished.", finish: true, summary: a.Summary}
}
