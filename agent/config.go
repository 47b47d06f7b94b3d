package agent

import (
	"io"
	"log/slog"
	"regexp"
	"strings"
	"time"
)

// Defaults applied by New and Run. Task-level defaults (turns, cost,
// tokens, wall clock) are the worker's business.
const (
	DefaultMaxOutputChars      = 10_000
	DefaultContextWindow       = 128_000
	DefaultHardTurnCap         = 100
	DefaultMaxFormatErrors     = 3
	DefaultMaxFinishRejections = 2
)

func (c Config) withDefaults() Config {
	if c.MaxOutputChars <= 0 {
		c.MaxOutputChars = DefaultMaxOutputChars
	}
	if c.CommandTimeout <= 0 {
		c.CommandTimeout = 2 * time.Minute
	}
	if c.MaxCommandTimeout <= 0 {
		c.MaxCommandTimeout = 30 * time.Minute
	}
	if c.TestTimeout <= 0 {
		c.TestTimeout = 15 * time.Minute
	}
	if c.MaxFinishRejections <= 0 {
		c.MaxFinishRejections = DefaultMaxFinishRejections
	}
	cc := &c.Compaction
	if cc.Threshold <= 0 || cc.Threshold > 1 {
		cc.Threshold = 0.8
	}
	if cc.KeepTurns <= 0 {
		cc.KeepTurns = 4
	}
	if cc.MaxPerRun <= 0 {
		cc.MaxPerRun = 3
	}
	if cc.MinTurnsBetween <= 0 {
		cc.MinTurnsBetween = 5
	}
	rc := &c.Recovery
	if rc.AttemptBudget <= 0 {
		rc.AttemptBudget = 3
	}
	if rc.LoopWindow <= 0 {
		rc.LoopWindow = 12
	}
	if rc.LoopRepeats <= 1 {
		rc.LoopRepeats = 3
	}
	if rc.MaxIntentNudges <= 0 {
		rc.MaxIntentNudges = 2
	}
	if c.SubAgents.MaxTurns <= 0 {
		c.SubAgents.MaxTurns = 15
	}
	if c.SubAgents.MaxPerRun <= 0 {
		c.SubAgents.MaxPerRun = 5
	}
	if c.Diagnostics.Commands == nil {
		c.Diagnostics.Commands = DefaultDiagnostics()
	}
	if c.Diagnostics.Timeout <= 0 {
		c.Diagnostics.Timeout = 30 * time.Second
	}
	if c.ProjectInstructions == nil {
		c.ProjectInstructions = []string{"AGENTS.md", ".wrench/instructions.md"}
	}
	if c.ModelRetries < 0 {
		c.ModelRetries = 0
	} else if c.ModelRetries == 0 {
		c.ModelRetries = 3
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// datedSuffix matches a model snapshot suffix: "-2024-08-06", "-20250514"
// or "-latest".
var datedSuffix = regexp.MustCompile(`-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$`)

// lookupModel finds a model in m: exactly, then without a provider prefix
// ("openai/gpt-4o"), then without a snapshot suffix ("gpt-4o-2024-08-06").
// Other variants are not guessed ("o3-mini" is not "o3"). These are the
// rules of llm.PriceTable, so a table converted from it prices the same.
func lookupModel[V any](m map[string]V, name string) (V, bool) {
	if v, ok := m[name]; ok {
		return v, true
	}
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
		if v, ok := m[name]; ok {
			return v, true
		}
	}
	if base := datedSuffix.ReplaceAllString(name, ""); base != name {
		if v, ok := m[base]; ok {
			return v, true
		}
	}
	var zero V
	return zero, false
}

// Cost prices one model call's usage; ok is false when the model has no
// price.
func (c Config) Cost(model string, u TokenUsage) (usd float64, ok bool) {
	p, ok := lookupModel(c.Prices, model)
	if !ok {
		return 0, false
	}
	cached := p.CachedInputPerMTok
	if cached == 0 {
		cached = p.InputPerMTok
	}
	fresh := u.InputTokens - u.CachedTokens
	if fresh < 0 {
		fresh = 0
	}
	return (float64(fresh)*p.InputPerMTok + float64(u.CachedTokens)*cached + float64(u.OutputTokens)*p.OutputPerMTok) / 1e6, true
}

// contextWindow is the model's window: the operator's table, then what the
// model reports, then the default.
func (c Config) contextWindow(model string, reported int) int {
	if w, ok := lookupModel(c.ContextWindows, model); ok && w > 0 {
		return w
	}
	if reported > 0 {
		return reported
	}
	return DefaultContextWindow
}
