package llm_test

import (
	"maps"
	"math"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/llm"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

// cost prices usage with the agent's one price model.
func cost(prices map[string]agent.Price, model string, u agent.TokenUsage) float64 {
	c, _ := agent.Config{Prices: prices}.Cost(model, u)
	return c
}

func TestDefaultPrices(t *testing.T) {
	p := llm.DefaultPrices()
	tests := []struct {
		model string
		u     agent.TokenUsage
		want  float64
	}{
		{"gpt-4o", agent.TokenUsage{InputTokens: 1_000_000, OutputTokens: 1_000_000}, 12.50},
		{"gpt-4o", agent.TokenUsage{InputTokens: 1_000_000, CachedTokens: 400_000}, 0.6*2.50 + 0.4*1.25},
		{"gpt-4o-2024-08-06", agent.TokenUsage{InputTokens: 2_000}, 2_000 * 2.50 / 1e6},
		{"openai/gpt-4.1-mini", agent.TokenUsage{OutputTokens: 500_000}, 0.80},
		{"gpt-4o-mini", agent.TokenUsage{InputTokens: 1_000_000}, 0.15},
		{"o3-pro", agent.TokenUsage{InputTokens: 1_000_000}, 0}, // a variant is not priced as its family
		{"scripted", agent.TokenUsage{InputTokens: 1_000_000, OutputTokens: 1_000_000}, 0},
		{"unknown-model", agent.TokenUsage{InputTokens: 1_000_000}, 0},
	}
	for _, tt := range tests {
		if got := cost(p, tt.model, tt.u); !near(got, tt.want) {
			t.Errorf("Cost(%s, %+v) = %v, want %v", tt.model, tt.u, got, tt.want)
		}
	}
	for name, pr := range p {
		if name != "scripted" && pr.CachedInputPerMTok == 0 {
			t.Errorf("%s has no cached-input price", name)
		}
	}
}

func TestLoadPrices(t *testing.T) {
	y, err := llm.LoadPrices("testdata/prices.yaml")
	if err != nil {
		t.Fatal(err)
	}
	j, err := llm.LoadPrices("testdata/prices.json")
	if err != nil {
		t.Fatal(err)
	}
	p := llm.DefaultPrices()
	maps.Copy(p, y)
	maps.Copy(p, j)
	if got := cost(p, "gpt-4o", agent.TokenUsage{InputTokens: 1_000_000}); got != 3 {
		t.Errorf("overridden gpt-4o input cost = %v", got)
	}
	if got := cost(p, "claude-sonnet-4-20250514", agent.TokenUsage{InputTokens: 1_000_000, CachedTokens: 1_000_000}); !near(got, 0.3) {
		t.Errorf("dated claude cost = %v", got)
	}
	if pr := p["my-model"]; pr.CachedInputPerMTok != 0.5 {
		t.Errorf("my-model = %+v", pr)
	}
	if _, ok := llm.DefaultPrices()["local-llama"]; ok {
		t.Error("DefaultPrices is shared: copying over it changed the next one")
	}
	if _, err := llm.LoadPrices("testdata/none.yaml"); err == nil {
		t.Error("a missing file loads")
	}
}

func TestParsePrices_Errors(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"m: {input_per_mtok: 1}", "required"},
		{"m: {input_per_mtok: -1, output_per_mtok: 1}", "negative"},
		{"m: {input: 1, output_per_mtok: 1}", "input"},
		{"[1, 2]", "parse"},
	} {
		if _, err := llm.ParsePrices([]byte(tt.in)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParsePrices(%q) = %v, want an error about %q", tt.in, err, tt.want)
		}
	}
	if p, err := llm.ParsePrices(nil); err != nil || len(p) != 0 {
		t.Errorf("empty file: %v %v", p, err)
	}
}
