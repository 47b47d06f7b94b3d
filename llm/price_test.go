package llm_test

import (
	"math"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/llm"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

func TestPriceTable_Cost(t *testing.T) {
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
		if got := p.Cost(tt.model, tt.u); !near(got, tt.want) {
			t.Errorf("Cost(%s, %+v) = %v, want %v", tt.model, tt.u, got, tt.want)
		}
	}
	// Without a cached price, cached tokens cost the input price.
	q := llm.PriceTable{"m": {InputPerMTok: 1, OutputPerMTok: 2}}
	if got := q.Cost("m", agent.TokenUsage{InputTokens: 1_000_000, CachedTokens: 500_000}); !near(got, 1) {
		t.Errorf("cost without cached price = %v", got)
	}
}

func TestLoadPriceTable(t *testing.T) {
	y, err := llm.LoadPriceTable("testdata/prices.yaml")
	if err != nil {
		t.Fatal(err)
	}
	j, err := llm.LoadPriceTable("testdata/prices.json")
	if err != nil {
		t.Fatal(err)
	}
	p := llm.DefaultPrices().With(y).With(j)
	if got := p.Cost("gpt-4o", agent.TokenUsage{InputTokens: 1_000_000}); got != 3 {
		t.Errorf("overridden gpt-4o input cost = %v", got)
	}
	if got := p.Cost("claude-sonnet-4-20250514", agent.TokenUsage{InputTokens: 1_000_000, CachedTokens: 1_000_000}); !near(got, 0.3) {
		t.Errorf("dated claude cost = %v", got)
	}
	if pr, ok := p.Lookup("my-model"); !ok || pr.CachedInputPerMTok != 0.5 {
		t.Errorf("my-model = %+v %v", pr, ok)
	}
	if _, ok := llm.DefaultPrices().Lookup("local-llama"); ok {
		t.Error("With changed the defaults")
	}
	ap := p.AgentPrices()
	if ap["gpt-4o"] != (agent.Price{InputPerMTok: 3, OutputPerMTok: 12}) || len(ap) != len(p) {
		t.Errorf("AgentPrices = %v", ap)
	}
}

func TestParsePriceTable_Errors(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"m: {input_per_mtok: 1}", "required"},
		{"m: {input_per_mtok: -1, output_per_mtok: 1}", "negative"},
		{"m: {input: 1, output_per_mtok: 1}", "input"},
		{"[1, 2]", "parse"},
	} {
		if _, err := llm.ParsePriceTable([]byte(tt.in)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParsePriceTable(%q) = %v, want an error about %q", tt.in, err, tt.want)
		}
	}
	if p, err := llm.ParsePriceTable(nil); err != nil || len(p) != 0 {
		t.Errorf("empty file: %v %v", p, err)
	}
}
