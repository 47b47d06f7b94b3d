package llm

import (
	"strings"

	"github.com/wrenchworks/wrench/agent"
)

var _ agent.CapabilityReporter = (*Client)(nil)

// Capabilities reports what is known of the client's model (Config.Model;
// see [CapabilitiesOf]). The agent asks once per run: a model without tool
// calling is driven with the text protocol, and the context window sizes
// compaction unless the operator's table names the model.
func (c *Client) Capabilities() agent.Capabilities { return CapabilitiesOf(c.cfg.Model) }

// modelTraits is what is known of the models whose names start with prefix.
type modelTraits struct {
	prefix        string
	noToolCalling bool
	contextWindow int // tokens; 0 when it depends on the server
}

// knownModels is a small table of model families, matched by name prefix
// (the longest wins). Windows are the providers' published ones; a model
// marked without tool calling is one whose API (or Ollama's chat
// template) refuses a request with tools. Local models' windows are left
// out: the server's context setting decides them.
func knownModels() []modelTraits {
	return []modelTraits{
		// OpenAI.
		{prefix: "gpt-3.5-turbo", contextWindow: 16_385},
		{prefix: "gpt-4", contextWindow: 8_192},
		{prefix: "gpt-4-32k", contextWindow: 32_768},
		{prefix: "gpt-4-turbo", contextWindow: 128_000},
		{prefix: "gpt-4o", contextWindow: 128_000},
		{prefix: "gpt-4.1", contextWindow: 1_047_576},
		{prefix: "gpt-5", contextWindow: 400_000},
		{prefix: "gpt-5-chat", contextWindow: 128_000},
		{prefix: "gpt-oss", contextWindow: 131_072},
		{prefix: "o1", contextWindow: 200_000},
		{prefix: "o1-mini", noToolCalling: true, contextWindow: 128_000},
		{prefix: "o1-preview", noToolCalling: true, contextWindow: 128_000},
		{prefix: "o3", contextWindow: 200_000},
		{prefix: "o4-mini", contextWindow: 200_000},
		// Anthropic and Google through OpenAI-compatible endpoints.
		{prefix: "claude", contextWindow: 200_000},
		{prefix: "gemini-1.5", contextWindow: 1_048_576},
		{prefix: "gemini-2.0", contextWindow: 1_048_576},
		{prefix: "gemini-2.5", contextWindow: 1_048_576},
		// Open models whose chat templates have no tools.
		{prefix: "codellama", noToolCalling: true},
		{prefix: "deepseek-coder", noToolCalling: true},
		{prefix: "gemma", noToolCalling: true},
		{prefix: "gemma2", noToolCalling: true},
		{prefix: "gemma3", noToolCalling: true},
		{prefix: "gemma3n", noToolCalling: true},
		{prefix: "llama2", noToolCalling: true},
		{prefix: "phi3", noToolCalling: true},
		{prefix: "phi3.5", noToolCalling: true},
		{prefix: "phi4", noToolCalling: true},
		{prefix: "phi4-mini"}, // trained for tool use, unlike phi4
		{prefix: "starcoder2", noToolCalling: true},
	}
}

// CapabilitiesOf returns what the table of known models says of model:
// the name is matched case-insensitively, without a provider prefix
// ("openai/gpt-4o", "ollama/gemma3"), against family prefixes that end at
// a separator or the end of the name ("gpt-4o-2024-08-06" and "gemma3:4b"
// match, "gpt-4" does not match "gpt-4o"). An unknown model gets the zero
// value: tool calling, window unknown.
func CapabilitiesOf(model string) agent.Capabilities {
	name := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	var best modelTraits
	for _, m := range knownModels() {
		if len(m.prefix) > len(best.prefix) && familyOf(name, m.prefix) {
			best = m
		}
	}
	return agent.Capabilities{NoToolCalling: best.noToolCalling, ContextWindow: best.contextWindow}
}

// familyOf reports whether name is prefix or prefix followed by a
// separator (anything but a letter or digit).
func familyOf(name, prefix string) bool {
	if !strings.HasPrefix(name, prefix) {
		return false
	}
	if len(name) == len(prefix) {
		return true
	}
	c := name[len(prefix)]
	return !('a' <= c && c <= 'z' || '0' <= c && c <= '9')
}
