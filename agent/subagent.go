package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// SubAgentConfig tunes the research tool: a read-only sub-run with a fresh
// context that answers one question (seed 001's sub-agents, seed 004's
// task tool).
type SubAgentConfig struct {
	// Enabled offers the research tool in every normal-mode tools-protocol
	// run; a run's allowlist may also name it. Off by default.
	Enabled bool
	// MaxTurns caps each sub-run (default 15).
	MaxTurns int
	// MaxPerRun caps the sub-runs one run may start (default 5).
	MaxPerRun int
}

var researchTool = &tool{
	name: ToolResearch,
	desc: "Delegate a read-only investigation to a sub-agent with a fresh context. It can view, ls, glob and grep (no commands, no edits) and answers your question with its findings, which is all you see of its work. Use it to explore unfamiliar parts of a large codebase without filling your own context; ask one precise question and say what you need back (files, functions, line numbers).",
	params: `{"type":"object","properties":{` +
		`"question":{"type":"string","description":"what to find out, with the context the sub-agent needs"}},` +
		`"required":["question"]}`,
	required: []string{"question"},
	optional: true,
	run:      runResearch,
}

func runResearch(ctx context.Context, s *runState, raw json.RawMessage) toolResult {
	a, bad := args[struct {
		Question string `json:"question"`
	}](ToolResearch, raw)
	if bad != nil {
		return *bad
	}
	if strings.TrimSpace(a.Question) == "" {
		return formatError("research needs a non-empty question.")
	}
	cfg := s.a.cfg.SubAgents
	if s.subRuns >= cfg.MaxPerRun {
		return errorResult("this run has used all %d research sub-agents; investigate with view, grep and glob yourself.", cfg.MaxPerRun)
	}
	lim := Limits{MaxTurns: cfg.MaxTurns, MaxFormatErrors: s.lim.formatErr}
	if s.lim.costUSD > 0 {
		if lim.MaxCostUSD = s.lim.costUSD - s.usage.CostUSD; lim.MaxCostUSD <= 0 {
			return errorResult("no cost budget is left for a research sub-agent.")
		}
	}
	if s.lim.tokens > 0 {
		if lim.MaxTokens = s.lim.tokens - s.usage.InputTokens - s.usage.OutputTokens; lim.MaxTokens <= 0 {
			return errorResult("no token budget is left for a research sub-agent.")
		}
	}
	if !s.deadline.IsZero() {
		if lim.Timeout = time.Until(s.deadline); lim.Timeout <= 0 {
			return errorResult("no time is left for a research sub-agent.")
		}
	}
	s.subRuns++
	s.emit(task.Event{Kind: task.EventPhase, Phase: "research", Text: "start"})
	sub := &Run{
		Task:      task.Task{ID: fmt.Sprintf("%s/research-%d", s.r.Task.ID, s.subRuns), Instruction: a.Question},
		ModelName: s.r.ModelName,
		Model:     s.r.Model,
		Env:       s.r.Env,
		EnvInfo:   s.envInfo,
		Limits:    lim,
		Mode:      ModePlan,
		Verify:    VerifyNever,
		Secrets:   s.r.Secrets,
		// The parent's usage events cover the sub-run's model calls.
		OnEvent: func(e task.Event) {
			if e.Kind == task.EventUsage {
				e.Turn, e.Seq = s.turn, 0
				s.emit(e)
			}
		},
		subAgent: true,
	}
	// Through an interface: a direct call would make the tool registry
	// depend on itself at initialisation.
	var runner interface {
		Run(context.Context, *Run) (*Outcome, error)
	} = s.a
	out, err := runner.Run(ctx, sub)
	if err != nil {
		return errorResult("research: %v", err)
	}
	s.usage.InputTokens += out.Usage.InputTokens
	s.usage.OutputTokens += out.Usage.OutputTokens
	s.usage.CostUSD += out.Usage.CostUSD
	s.usage.ModelCalls += out.Usage.ModelCalls
	s.traj.write(Record{Kind: RecordUsage, Turn: s.turn, Note: "research sub-run", TotalUsage: &out.Usage, CostUSD: out.Usage.CostUSD, Duration: out.Duration})
	s.emit(task.Event{Kind: task.EventPhase, Phase: "research", Text: "end: " + string(out.Reason)})
	switch out.Reason {
	case StopFinished:
		return toolResult{
			output:  "Research findings:\n" + strings.TrimSpace(out.Summary),
			display: fmt.Sprintf("research finished in %d turns", out.Usage.Turns),
		}
	case StopCancelled:
		return toolResult{fatal: cmpErr(out.Err, ctx.Err()), output: "Error: interrupted", isError: true}
	case StopEnvError:
		return toolResult{fatal: fmt.Errorf("research: %w", out.Err), output: "Error: the environment failed", isError: true}
	}
	msg := fmt.Sprintf("The research sub-agent stopped (%s) without a conclusion.", out.Reason)
	if last := lastAssistantText(out.Messages); last != "" {
		msg += " Its last words:\n" + capOutput(last, s.a.cfg.MaxOutputChars, 0)
	}
	return toolResult{output: msg, isError: true}
}

// cmpErr returns the first non-nil error, or context.Canceled.
func cmpErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return context.Canceled
}

// lastAssistantText is the text of the last assistant message that has any.
func lastAssistantText(msgs []Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleAssistant && strings.TrimSpace(msgs[i].Content) != "" {
			return strings.TrimSpace(msgs[i].Content)
		}
	}
	return ""
}
