package llm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"gopkg.in/yaml.v3"

	"github.com/wrenchworks/wrench/agent"
)

// Prices are the agent's price model (agent.Price, looked up and charged
// by agent.Config.Cost); this file holds where prices come from: the
// built-in list and price files.

// DefaultPrices returns a new table with list prices of a few common
// models (OpenAI's published prices as of mid-2025; load a file for
// others or when they change) and a zero price for "scripted".
func DefaultPrices() map[string]agent.Price {
	return map[string]agent.Price{
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

// priceFileEntry is one model in a price file.
type priceFileEntry struct {
	Input       *float64 `yaml:"input_per_mtok"`
	Output      *float64 `yaml:"output_per_mtok"`
	CachedInput float64  `yaml:"cached_input_per_mtok"`
}

// LoadPrices reads a price file: YAML or JSON mapping a model name to
// input_per_mtok, output_per_mtok and optionally cached_input_per_mtok, e.g.
//
//	gpt-4o: {input_per_mtok: 2.5, output_per_mtok: 10, cached_input_per_mtok: 1.25}
//
// Copy it over DefaultPrices() to override or add models.
func LoadPrices(path string) (map[string]agent.Price, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load prices: %w", err)
	}
	t, err := ParsePrices(data)
	if err != nil {
		return nil, fmt.Errorf("load prices %s: %w", path, err)
	}
	return t, nil
}

// ParsePrices parses the price file format of [LoadPrices].
func ParsePrices(data []byte) (map[string]agent.Price, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var raw map[string]priceFileEntry
	if err := dec.Decode(&raw); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parse prices: %w", err)
	}
	t := make(map[string]agent.Price, len(raw))
	for name, e := range raw {
		if e.Input == nil || e.Output == nil {
			return nil, fmt.Errorf("parse prices: %s: input_per_mtok and output_per_mtok are required", name)
		}
		if *e.Input < 0 || *e.Output < 0 || e.CachedInput < 0 {
			return nil, fmt.Errorf("parse prices: %s: prices must not be negative", name)
		}
		t[name] = agent.Price{InputPerMTok: *e.Input, OutputPerMTok: *e.Output, CachedInputPerMTok: e.CachedInput}
	}
	return t, nil
}
