package llm_test

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/llm"
)

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestOpen_Scripted(t *testing.T) {
	cfg := llm.OpenConfig{Client: llm.Config{MaxRetries: -1}}
	m, name, closeFn, err := llm.Open(context.Background(), "scripted:scripted/testdata/fix_add.yaml", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if name != llm.ScriptedModelName {
		t.Errorf("name = %q", name)
	}
	resp, err := m.Chat(context.Background(), agent.ModelRequest{Messages: userMsg}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.ToolCalls[0].Name != "bash" || resp.Model != "scripted" {
		t.Errorf("reply = %+v", resp)
	}
	if err := closeFn(); err != nil {
		t.Fatal(err)
	}
	_, err = m.Chat(context.Background(), agent.ModelRequest{Messages: userMsg}, nil)
	if !agent.IsModelError(err, agent.ModelNetwork) {
		t.Errorf("after close: %v", err)
	}

	_, name, closeFn, err = llm.Open(context.Background(), "scripted:scripted/testdata/raw_args.yaml", llm.OpenConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if name != "scripted-raw" {
		t.Errorf("name from the script = %q", name)
	}

	// The default model ($WRENCH_LLM_MODEL) may be a script too: a
	// service's workers play it for tasks that name no model.
	_, name, closeDefault, err := llm.Open(context.Background(), "",
		llm.OpenConfig{Getenv: env(map[string]string{llm.EnvModel: "scripted:scripted/testdata/raw_args.yaml"})})
	if err != nil {
		t.Fatal(err)
	}
	defer closeDefault()
	if name != "scripted-raw" {
		t.Errorf("default scripted model's name = %q", name)
	}
}

func TestOpen_Endpoint(t *testing.T) {
	tests := []struct {
		name, spec string
		env        map[string]string
		wantName   string
	}{
		{"model name with key", "gpt-4o", map[string]string{llm.EnvAPIKey: "k"}, "gpt-4o"},
		{"OPENAI_API_KEY fallback", "gpt-4o", map[string]string{llm.EnvOpenAIKey: "k"}, "gpt-4o"},
		{"colon in a model name", "qwen2.5:7b", map[string]string{llm.EnvBaseURL: "http://127.0.0.1:11434/v1"}, "qwen2.5:7b"},
		{"openai scheme", "openai:gpt-4.1-mini", map[string]string{llm.EnvAPIKey: "k"}, "gpt-4.1-mini"},
		{"empty spec uses WRENCH_LLM_MODEL", "", map[string]string{llm.EnvAPIKey: "k", llm.EnvModel: "gpt-5"}, "gpt-5"},
		{"empty spec default", "", map[string]string{llm.EnvAPIKey: "k"}, llm.DefaultModel},
		{"local endpoint needs no key", "llama3", map[string]string{llm.EnvBaseURL: "http://localhost:8000/v1"}, "llama3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, name, closeFn, err := llm.Open(context.Background(), tt.spec, llm.OpenConfig{Getenv: env(tt.env)})
			if err != nil {
				t.Fatal(err)
			}
			defer closeFn()
			if name != tt.wantName || m == nil {
				t.Errorf("name = %q, want %q", name, tt.wantName)
			}
		})
	}
}

func TestOpen_SpecErrors(t *testing.T) {
	withKey := map[string]string{llm.EnvAPIKey: "k"}
	tests := []struct {
		name, spec string
		env        map[string]string
		want       string
	}{
		{"URL", "http://localhost:8080/v1", withKey, "looks like a URL"},
		{"unknown scheme", "file:model.gguf", withKey, "unknown scheme"},
		{"script typo", "script:x.yaml", withKey, "unknown scheme"},
		{"spaces", "gpt 4o", withKey, "no spaces"},
		{"empty script", "scripted:", withKey, "no script file"},
		{"missing script", "scripted:testdata/nope.yaml", withKey, "no such file"},
		{"invalid script", "scripted:testdata/bad_script.yaml", withKey, "contnet"},
		{"empty openai name", "openai:", withKey, "no model name"},
		{"no API key", "gpt-4o", nil, llm.EnvAPIKey},
		{"nil getenv means no key", "gpt-4o", nil, "no API key"},
		{"bad base URL", "gpt-4o", map[string]string{llm.EnvAPIKey: "k", llm.EnvBaseURL: "localhost:8080"}, "absolute http(s) URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := llm.OpenConfig{}
			if tt.env != nil {
				cfg.Getenv = env(tt.env)
			}
			_, _, _, err := llm.Open(context.Background(), tt.spec, cfg)
			var se *llm.SpecError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want a SpecError mentioning %q", err, tt.want)
			}
		})
	}
	_, _, _, err := llm.Open(context.Background(), "scripted:testdata/nope.yaml", llm.OpenConfig{})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing script error does not wrap fs.ErrNotExist: %v", err)
	}
}

// TestKeyWarning: no key for OpenAI's endpoint is worth a warning, unless
// the default model needs none.
func TestKeyWarning(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		warn bool
	}{
		{map[string]string{}, true},
		{map[string]string{llm.EnvAPIKey: "k"}, false},
		{map[string]string{llm.EnvBaseURL: "http://127.0.0.1:11434/v1"}, false},
		{map[string]string{llm.EnvModel: "scripted:fix.yaml"}, false},
		{map[string]string{llm.EnvModel: "gpt-5"}, true},
	} {
		if got := llm.KeyWarning(env(c.env)) != ""; got != c.warn {
			t.Errorf("%v: warning %v, want %v", c.env, got, c.warn)
		}
	}
}
