package main

import (
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/wrenchworks/wrench/agent"
)

// TestPricesFlag: --prices adds and overrides models over the built-in
// list, and the built-in cached-input prices reach the agent.
func TestPricesFlag(t *testing.T) {
	file := filepath.Join(t.TempDir(), "prices.yaml")
	os.WriteFile(file, []byte("my-model: {input_per_mtok: 1, output_per_mtok: 2, cached_input_per_mtok: 0.5}\ngpt-4o-mini: {input_per_mtok: 3, output_per_mtok: 4}\n"), 0o644)
	cfg, err := agentFlags{prices: file}.config(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		model string
		u     agent.TokenUsage
		want  float64
	}{
		{"my-model", agent.TokenUsage{InputTokens: 1_000_000, CachedTokens: 500_000, OutputTokens: 1_000_000}, 0.5 + 0.25 + 2},
		{"gpt-4o-mini", agent.TokenUsage{InputTokens: 1_000_000}, 3},
		// A built-in price keeps its cached-input price.
		{"gpt-4o", agent.TokenUsage{InputTokens: 1_000_000, CachedTokens: 1_000_000}, 1.25},
	} {
		got, ok := cfg.Cost(tt.model, tt.u)
		if !ok || math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("Cost(%s) = %v, %v; want %v", tt.model, got, ok, tt.want)
		}
	}
	if _, err := (agentFlags{prices: "/no/such/prices.yaml"}).config(nil); err == nil {
		t.Error("a missing price file is accepted")
	}
}
