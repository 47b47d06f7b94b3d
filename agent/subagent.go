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
// context that answers one question, so the parent's context holds only
// the answer.
type SubAgentConfig struct {
	// Enabled offers the research tool in every normal-mode tools-protocol
	// run; a run's allowlist may also name it. Off by default.
	Enabled bool
	// MaxTurns caps each sub-run (default 15).
	MaxTurns int
	// MaxPerRun caps the sub-runs one run may start (default 5).
	MaxPerRun int
}

var researchTool = &toolDef{
	name: ToolResearch,
	desc: "Delegate a read-only investigation to a sub-agent with a fresh context. It can view, ls, glob and grep (no commands, no edits) and answers your question with its findings, which is all you see of its work. Use it to explore unfamiliar parts of a large codebase without filling your own context; ask one precise question and say what you need back (files, functions, line numbers).",
	params: `{"type":"object","properties":{` +
		`"question":{"type":"string","description":"what to find out, with the context the sub-agent needs"}},` +
		`"required":["question"]}`,
	required: []string{"question"},
	optional: true,
	bind: func(k *toolKit) tool {
		return &research{start: k.research, max: k.cfg.SubAgents.MaxPerRun, maxOutput: k.cfg.MaxOutputChars}
	},
}

// researcher starts research sub-runs; the run implements it, since a
// sub-run spends the run's budget.
type researcher interface {
	// research runs the n-th sub-run of the run on question. refusal,
	// when not empty, says why none could start (no budget left).
	research(ctx context.Context, question string, n int) (out *Outcome, refusal string, err error)
}

// research delegates a question to a read-only sub-run, at most max times
// per run.
type research struct {
	start     researcher // nil: no sub-runs (replay)
	max       int
	runs      int
	maxOutput int
}

func (t *research) run(ctx context.Context, _ ToolCall, raw json.RawMessage) toolResult {
	a, bad := args[struct {
		Question string `json:"question"`
	}](ToolResearch, raw)
	if bad != nil {
		return *bad
	}
	if strings.TrimSpace(a.Question) == "" {
		return formatError("research needs a non-empty question.")
	}
	if t.start == nil {
		return errorResult("research is not available in this run.")
	}
	if t.runs >= t.max {
		return errorResult("this run has used all %d research sub-agents; investigate with view, grep and glob yourself.", t.max)
	}
	out, refusal, err := t.start.research(ctx, a.Question, t.runs+1)
	if refusal != "" {
		return errorResult("%s", refusal)
	}
	t.runs++
	if err != nil {
		return errorResult("research: %v", err)
	}
	return researchResult(ctx, out, t.maxOutput)
}

// researchResult tells the model how a sub-run ended.
func researchResult(ctx context.Context, out *Outcome, maxOutput int) toolResult {
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
		msg += " Its last words:\n" + capOutput(last, maxOutput, 0)
	}
	return toolResult{output: msg, isError: true}
}

// research implements researcher: the sub-run gets what is left of the
// run's cost, token and time budget, and its usage counts as the run's.
func (s *runState) research(ctx context.Context, question string, n int) (*Outcome, string, error) {
	lim, refusal := s.subRunLimits()
	if refusal != "" {
		return nil, refusal, nil
	}
	s.emit(task.Event{Kind: task.EventPhase, Phase: "research", Text: "start"})
	sub := &Run{
		Task:      task.Task{ID: fmt.Sprintf("%s/research-%d", s.r.Task.ID, n), Instruction: question},
		ModelName: s.r.ModelName,
		Model:     s.r.Model,
		Env:       s.r.Env,
		EnvInfo:   s.envInfo,
		Limits:    lim,
		Budget:    s.r.Budget,
		Mode:      task.ModePlan,
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
	out, err := s.a.Run(ctx, sub)
	if err != nil {
		return nil, "", err
	}
	s.usage.InputTokens += out.Usage.InputTokens
	s.usage.OutputTokens += out.Usage.OutputTokens
	s.usage.CostUSD += out.Usage.CostUSD
	s.usage.ModelCalls += out.Usage.ModelCalls
	s.traj.write(Record{Kind: RecordUsage, Turn: s.turn, Note: "research sub-run", TotalUsage: &out.Usage, CostUSD: out.Usage.CostUSD, Duration: out.Duration})
	s.emit(task.Event{Kind: task.EventPhase, Phase: "research", Text: "end: " + string(out.Reason)})
	return out, "", nil
}

// subRunLimits are a research sub-run's limits: its own turn cap and what
// is left of the run's; refusal says which budget is spent.
func (s *runState) subRunLimits() (Limits, string) {
	lim := Limits{MaxTurns: s.a.cfg.SubAgents.MaxTurns, MaxFormatErrors: s.lim.formatErr}
	if s.lim.costUSD > 0 {
		if lim.MaxCostUSD = s.lim.costUSD - s.usage.CostUSD; lim.MaxCostUSD <= 0 {
			return lim, "no cost budget is left for a research sub-agent."
		}
	}
	if s.lim.tokens > 0 {
		if lim.MaxTokens = s.lim.tokens - s.usage.InputTokens - s.usage.OutputTokens; lim.MaxTokens <= 0 {
			return lim, "no token budget is left for a research sub-agent."
		}
	}
	if !s.deadline.IsZero() {
		if lim.Timeout = time.Until(s.deadline); lim.Timeout <= 0 {
			return lim, "no time is left for a research sub-agent."
		}
	}
	return lim, ""
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
