package llm_test

import (
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/llm"
)

func TestCapabilitiesOf(t *testing.T) {
	tests := []struct {
		model string
		want  agent.Capabilities
	}{
		{"gpt-4o", agent.Capabilities{ContextWindow: 128_000}},
		{"gpt-4o-mini", agent.Capabilities{ContextWindow: 128_000}},
		{"gpt-4o-2024-08-06", agent.Capabilities{ContextWindow: 128_000}},
		{"openai/GPT-4.1-mini", agent.Capabilities{ContextWindow: 1_047_576}},
		{"gpt-4", agent.Capabilities{ContextWindow: 8_192}},
		{"gpt-4-0613", agent.Capabilities{ContextWindow: 8_192}},
		{"gpt-4-turbo-2024-04-09", agent.Capabilities{ContextWindow: 128_000}},
		{"gpt-5-mini", agent.Capabilities{ContextWindow: 400_000}},
		{"gpt-5-chat-latest", agent.Capabilities{ContextWindow: 128_000}},
		{"o1", agent.Capabilities{ContextWindow: 200_000}},
		{"o1-mini", agent.Capabilities{NoToolCalling: true, ContextWindow: 128_000}},
		{"o1-preview-2024-09-12", agent.Capabilities{NoToolCalling: true, ContextWindow: 128_000}},
		{"o3-mini", agent.Capabilities{ContextWindow: 200_000}},
		{"claude-sonnet-4-20250514", agent.Capabilities{ContextWindow: 200_000}},
		{"gemma3:4b", agent.Capabilities{NoToolCalling: true}},
		{"ollama/gemma2", agent.Capabilities{NoToolCalling: true}},
		{"phi4", agent.Capabilities{NoToolCalling: true}},
		{"phi4-mini:latest", agent.Capabilities{}},
		{"deepseek-coder-v2:16b", agent.Capabilities{NoToolCalling: true}},
		// Not matched: a prefix must end at a separator.
		{"o30-experimental", agent.Capabilities{}},
		{"gemmax", agent.Capabilities{}},
		{"functiongemma", agent.Capabilities{}},
		{"qwen2.5-coder:7b", agent.Capabilities{}},
		{"scripted", agent.Capabilities{}},
		{"", agent.Capabilities{}},
	}
	for _, tt := range tests {
		if got := llm.CapabilitiesOf(tt.model); got != tt.want {
			t.Errorf("CapabilitiesOf(%q) = %+v, want %+v", tt.model, got, tt.want)
		}
	}
}

// The client reports its configured model's capabilities to the agent,
// which picks the text protocol for a model without tool calling.
func TestClientReportsCapabilities(t *testing.T) {
	for _, tt := range []struct {
		model  string
		noTool bool
		window int
	}{
		{"o1-mini", true, 128_000},
		{"gpt-4.1", false, 1_047_576},
		{"my-local-model", false, 0},
	} {
		c, err := llm.New(llm.Config{BaseURL: "http://127.0.0.1:1/v1", Model: tt.model})
		if err != nil {
			t.Fatal(err)
		}
		var m agent.Model = c
		r, ok := m.(agent.CapabilityReporter)
		if !ok {
			t.Fatal("*llm.Client does not implement agent.CapabilityReporter")
		}
		if got := r.Capabilities(); got.NoToolCalling != tt.noTool || got.ContextWindow != tt.window {
			t.Errorf("%s: Capabilities = %+v, want NoToolCalling %v, ContextWindow %d", tt.model, got, tt.noTool, tt.window)
		}
	}
}
