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
	DefaultMaxFormatErrors     = 3
	DefaultMaxFinishRejections = 2
	DefaultMaxCallsPerReply    = 32
	DefaultMaxToolArgBytes     = 1 << 20
	// DefaultMaxOutputTokens caps a reply of a run with a Budget.
	DefaultMaxOutputTokens = 16_384
)

func (c Config) withDefaults() Config {
	orDefault(&c.MaxOutputChars, DefaultMaxOutputChars)
	orDefault(&c.MaxCallsPerReply, DefaultMaxCallsPerReply)
	orDefault(&c.MaxToolArgBytes, DefaultMaxToolArgBytes)
	orDefault(&c.MaxOutputTokens, DefaultMaxOutputTokens)
	orDefault(&c.CommandTimeout, 2*time.Minute)
	orDefault(&c.MaxCommandTimeout, 30*time.Minute)
	orDefault(&c.MaxFinishRejections, DefaultMaxFinishRejections)
	c.Compaction = c.Compaction.withDefaults()
	c.Recovery = c.Recovery.withDefaults()
	orDefault(&c.SubAgents.MaxTurns, 15)
	orDefault(&c.SubAgents.MaxPerRun, 5)
	if c.Diagnostics.Commands == nil {
		c.Diagnostics.Commands = DefaultDiagnostics()
	}
	orDefault(&c.Diagnostics.Timeout, 30*time.Second)
	if c.ProjectInstructions == nil {
		c.ProjectInstructions = []string{"AGENTS.md", ".wrench/instructions.md"}
	}
	c.ModelRetries = max(c.ModelRetries, 0)
	orDefault(&c.RetryBackoff, time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (cc CompactionConfig) withDefaults() CompactionConfig {
	if cc.Threshold <= 0 || cc.Threshold > 1 {
		cc.Threshold = 0.8
	}
	orDefault(&cc.KeepTurns, 4)
	orDefault(&cc.MaxPerRun, 3)
	orDefault(&cc.MinTurnsBetween, 5)
	return cc
}

func (rc RecoveryConfig) withDefaults() RecoveryConfig {
	orDefault(&rc.AttemptBudget, 3)
	orDefault(&rc.LoopWindow, 12)
	if rc.LoopRepeats <= 1 {
		rc.LoopRepeats = 3
	}
	orDefault(&rc.MaxIntentNudges, 2)
	return rc
}

// orDefault sets *v to def unless it is positive.
func orDefault[T int | int64 | float64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// datedSuffix matches a model snapshot suffix: "-2024-08-06", "-20250514"
// or "-latest".
var datedSuffix = regexp.MustCompile(`-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$`)

// lookupModel finds a model in m: exactly, then without a provider prefix
// ("openai/gpt-4o"), then without a snapshot suffix ("gpt-4o-2024-08-06").
// Other variants are not guessed ("o3-mini" is not "o3"). These are the
// rules for Config.Prices and Config.ContextWindows.
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
	return p.Cost(u), true
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
