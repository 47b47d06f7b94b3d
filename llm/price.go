package llm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/wrenchworks/wrench/agent"
)

// Price is a model's price per million tokens, in US dollars.
type Price struct {
	InputPerMTok  float64
	OutputPerMTok float64
	// CachedInputPerMTok prices input tokens served from the prompt cache;
	// 0 means they cost InputPerMTok.
	CachedInputPerMTok float64
}

// PriceTable maps a model name to its price. A name is looked up exactly,
// then without a provider prefix ("openai/gpt-4o"), then without a snapshot
// suffix ("gpt-4o-2024-08-06", "claude-sonnet-4-20250514", "…-latest").
// Other variants ("o3-pro") are not guessed from their family: they are
// unknown until the table names them.
type PriceTable map[string]Price

// DefaultPrices returns a new table with list prices of a few common
// models (OpenAI's published prices as of mid-2025; load a file for
// others or when they change) and a zero price for "scripted".
func DefaultPrices() PriceTable {
	return PriceTable{
		"scripted":     {},
		"gpt-4o":       {InputPerMTok: 2.50, OutputPerMTok: 10.00, CachedInputPerMTok: 1.25},
		"gpt-4o-mini":  {InputPerMTok: 0.15, OutputPerMTok: 0.60, CachedInputPerMTok: 0.075},
		"gpt-4.1":      {InputPerMTok: 2.00, OutputPerMTok: 8.00, CachedInputPerMTok: 0.50},
		"gpt-4.1-mini": {InputPerMTok: 0.40, OutputPerMTok: 1.60, CachedInputPerMTok: 0.10},
		"gpt-4.1-nano": {InputPerMTok: 0.10, OutputPerMTok: 0.40, CachedInputPerMTok: 0.025},
		"gpt-5":        {InputPerMTok: 1.25, OutputPerMTok: 10.00, CachedInputPerMTok: 0.125},
		"gpt-5-mini":   {InputPerMTok: 0.25, OutputPerMTok: 2.00, CachedInputPerMTok: 0.025},
		"gpt-5-nano":   {InputPerMTok: 0.05, OutputPerMTok: 0.40, CachedInputPerMTok: 0.005},
		"o3":           {InputPerMTok: 2.00, OutputPerMTok: 8.00, CachedInputPerMTok: 0.50},
		"o3-mini":      {InputPerMTok: 1.10, OutputPerMTok: 4.40, CachedInputPerMTok: 0.55},
		"o4-mini":      {InputPerMTok: 1.10, OutputPerMTok: 4.40, CachedInputPerMTok: 0.275},
	}
}

// Lookup finds the price of model (see [PriceTable]).
func (p PriceTable) Lookup(model string) (Price, bool) {
	if pr, ok := p[model]; ok {
		return pr, true
	}
	if i := strings.LastIndex(model, "/"); i >= 0 {
		model = model[i+1:]
		if pr, ok := p[model]; ok {
			return pr, true
		}
	}
	if base := datedSuffix.ReplaceAllString(model, ""); base != model {
		if pr, ok := p[base]; ok {
			return pr, true
		}
	}
	return Price{}, false
}

// datedSuffix matches the snapshot suffix of a model name:
// "-2024-08-06", "-20250514" or "-latest".
var datedSuffix = regexp.MustCompile(`-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$`)

// Cost is what usage u of model costs in US dollars; 0 for a model the
// table does not know. Cached tokens are counted within InputTokens, as the
// OpenAI API reports them.
func (p PriceTable) Cost(model string, u agent.TokenUsage) float64 {
	pr, ok := p.Lookup(model)
	if !ok {
		return 0
	}
	cached := min(max(u.CachedTokens, 0), u.InputTokens)
	cachedPrice := pr.CachedInputPerMTok
	if cachedPrice == 0 {
		cachedPrice = pr.InputPerMTok
	}
	return (float64(u.InputTokens-cached)*pr.InputPerMTok +
		float64(cached)*cachedPrice +
		float64(u.OutputTokens)*pr.OutputPerMTok) / 1e6
}

// With returns a new table: p's entries overridden by other's.
func (p PriceTable) With(other PriceTable) PriceTable {
	out := maps.Clone(p)
	if out == nil {
		out = PriceTable{}
	}
	maps.Copy(out, other)
	return out
}

// AgentPrices converts the table to the agent's price map (which has no
// cached-input price: cached tokens are then charged at the input price).
func (p PriceTable) AgentPrices() map[string]agent.Price {
	out := make(map[string]agent.Price, len(p))
	for name, pr := range p {
		out[name] = agent.Price{InputPerMTok: pr.InputPerMTok, OutputPerMTok: pr.OutputPerMTok}
	}
	return out
}

// priceFileEntry is one model in a price file.
type priceFileEntry struct {
	Input       *float64 `yaml:"input_per_mtok"`
	Output      *float64 `yaml:"output_per_mtok"`
	CachedInput float64  `yaml:"cached_input_per_mtok"`
}

// LoadPriceTable reads a price file: YAML or JSON mapping a model name to
// input_per_mtok, output_per_mtok and optionally cached_input_per_mtok, e.g.
//
//	gpt-4o: {input_per_mtok: 2.5, output_per_mtok: 10, cached_input_per_mtok: 1.25}
//
// Merge it over the defaults with DefaultPrices().With(table).
func LoadPriceTable(path string) (PriceTable, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load price table: %w", err)
	}
	t, err := ParsePriceTable(data)
	if err != nil {
		return nil, fmt.Errorf("load price table %s: %w", path, err)
	}
	return t, nil
}

// ParsePriceTable parses the price file format of [LoadPriceTable].
func ParsePriceTable(data []byte) (PriceTable, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var raw map[string]priceFileEntry
	if err := dec.Decode(&raw); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parse price table: %w", err)
	}
	t := make(PriceTable, len(raw))
	for name, e := range raw {
		if e.Input == nil || e.Output == nil {
			return nil, fmt.Errorf("parse price table: %s: input_per_mtok and output_per_mtok are required", name)
		}
		if *e.Input < 0 || *e.Output < 0 || e.CachedInput < 0 {
			return nil, fmt.Errorf("parse price table: %s: prices must not be negative", name)
		}
		t[name] = Price{InputPerMTok: *e.Input, OutputPerMTok: *e.Output, CachedInputPerMTok: e.CachedInput}
	}
	return t, nil
}
