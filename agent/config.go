package agent

import (
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// Defaults applied by New and LimitsFromTask.
const (
	DefaultMaxOutputChars      = 10_000
	DefaultContextWindow       = 128_000
	DefaultHardTurnCap         = 100
	DefaultMaxFormatErrors     = 3
	DefaultMaxFinishRejections = 2
	DefaultMaxTurns            = 50
	DefaultMaxCostUSD          = 5.0
	DefaultMaxTokens           = 5_000_000
	DefaultTimeout             = 30 * time.Minute
)

// DefaultPrices returns the built-in price table (US dollars per million
// tokens, list prices published by the vendors in 2025). Names match by
// longest prefix, so "gpt-4o-2024-08-06" uses "gpt-4o". Models served
// locally or scripted cost nothing. Operators override it with
// Config.Prices (from the configuration file).
func DefaultPrices() map[string]Price {
	return map[string]Price{
		"gpt-4o":            {InputPerMTok: 2.50, OutputPerMTok: 10, CachedInputPerMTok: 1.25},
		"gpt-4o-mini":       {InputPerMTok: 0.15, OutputPerMTok: 0.60, CachedInputPerMTok: 0.075},
		"gpt-4.1":           {InputPerMTok: 2, OutputPerMTok: 8, CachedInputPerMTok: 0.50},
		"gpt-4.1-mini":      {InputPerMTok: 0.40, OutputPerMTok: 1.60, CachedInputPerMTok: 0.10},
		"gpt-4.1-nano":      {InputPerMTok: 0.10, OutputPerMTok: 0.40, CachedInputPerMTok: 0.025},
		"o3":                {InputPerMTok: 2, OutputPerMTok: 8, CachedInputPerMTok: 0.50},
		"o4-mini":           {InputPerMTok: 1.10, OutputPerMTok: 4.40, CachedInputPerMTok: 0.275},
		"claude-sonnet-4":   {InputPerMTok: 3, OutputPerMTok: 15, CachedInputPerMTok: 0.30},
		"claude-opus-4":     {InputPerMTok: 15, OutputPerMTok: 75, CachedInputPerMTok: 1.50},
		"claude-3-5-haiku":  {InputPerMTok: 0.80, OutputPerMTok: 4, CachedInputPerMTok: 0.08},
		"deepseek-chat":     {InputPerMTok: 0.27, OutputPerMTok: 1.10, CachedInputPerMTok: 0.07},
		"deepseek-reasoner": {InputPerMTok: 0.55, OutputPerMTok: 2.19, CachedInputPerMTok: 0.14},
		"scripted":          {},
	}
}

// LimitsFromTask maps a task's limits (where 0 means "the default") to run
// limits, filling DefaultMaxTurns, DefaultMaxCostUSD, DefaultMaxTokens and
// DefaultTimeout. MaxTurns -1 stays -1 (unlimited under the hard cap, which
// is raised to task.MaxTurnsHardCap).
func LimitsFromTask(l task.Limits) Limits {
	out := Limits{
		MaxTurns:   l.MaxTurns,
		MaxCostUSD: l.MaxCostUSD,
		MaxTokens:  l.MaxTokens,
		Timeout:    time.Duration(l.Timeout),
	}
	if out.MaxTurns == 0 {
		out.MaxTurns = DefaultMaxTurns
	}
	if out.MaxTurns == -1 {
		out.HardTurnCap = task.MaxTurnsHardCap
	}
	if out.MaxCostUSD == 0 {
		out.MaxCostUSD = DefaultMaxCostUSD
	}
	if out.MaxTokens == 0 {
		out.MaxTokens = DefaultMaxTokens
	}
	if out.Timeout == 0 {
		out.Timeout = DefaultTimeout
	}
	return out
}

func (c Config) withDefaults() Config {
	if c.Prices == nil {
		c.Prices = DefaultPrices()
	}
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

// lookupPrefix finds name in m exactly, then by the longest key that is a
// prefix of name.
func lookupPrefix[V any](m map[string]V, name string) (V, bool) {
	if v, ok := m[name]; ok {
		return v, true
	}
	var best V
	bestLen, found := -1, false
	for k, v := range m {
		if strings.HasPrefix(name, k) && len(k) > bestLen {
			best, bestLen, found = v, len(k), true
		}
	}
	return best, found
}

// Cost prices one model call's usage; ok is false when the model has no
// price.
func (c Config) Cost(model string, u TokenUsage) (usd float64, ok bool) {
	p, ok := lookupPrefix(c.Prices, model)
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

func (c Config) contextWindow(model string) int {
	if w, ok := lookupPrefix(c.ContextWindows, model); ok && w > 0 {
		return w
	}
	return DefaultContextWindow
}
