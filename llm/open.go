package llm

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/llm/scripted"
)

// The environment variables [Open] reads.
const (
	EnvBaseURL   = "WRENCH_LLM_BASE_URL"
	EnvAPIKey    = "WRENCH_LLM_API_KEY"
	EnvOpenAIKey = "OPENAI_API_KEY" // fallback for EnvAPIKey
	EnvModel     = "WRENCH_LLM_MODEL"
)

// Defaults of [Open].
const (
	DefaultBaseURL = "https://api.openai.com/v1"
	DefaultModel   = "gpt-4.1"
	// ScriptedModelName is the model name of a scripted model whose script
	// names none.
	ScriptedModelName = "scripted"
)

// OpenConfig configures [Open].
type OpenConfig struct {
	// Getenv reads the environment (os.Getenv in the CLI); nil means an
	// empty environment.
	Getenv func(string) string
	// Client is the template of the returned client. Open fills BaseURL,
	// APIKey and Model where they are empty; values set here win over the
	// environment.
	Client Config
	// ScriptOptions are passed to the scripted model server.
	ScriptOptions []scripted.Option
}

// SpecError is a --model value (or the environment it depends on) that
// cannot be opened: the CLI exits 2 on it.
type SpecError struct {
	Spec   string
	Reason string
	Err    error
}

// Error describes the spec and what is wrong with it.
func (e *SpecError) Error() string {
	msg := fmt.Sprintf("model %q: %s", e.Spec, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the underlying error, if any.
func (e *SpecError) Unwrap() error { return e.Err }

// Open opens the model a --model value names and returns it with the model
// name to send and to price, and a close function the caller must call
// when done with the model.
//
//   - "scripted:FILE" loads the script, serves it on 127.0.0.1 on a free
//     port and returns a client pointed at it; close stops the server. The
//     name is the script's model, or "scripted". No API key is used.
//   - "" or a model name ("gpt-4.1", "qwen2.5:7b", also "openai:NAME")
//     uses WRENCH_LLM_BASE_URL (default https://api.openai.com/v1) and
//     WRENCH_LLM_API_KEY, falling back to OPENAI_API_KEY. An empty spec
//     means WRENCH_LLM_MODEL (any spec, "scripted:FILE" too), else
//     DefaultModel. A key is required for the
//     default (OpenAI) endpoint only: local endpoints may need none.
//
// A spec containing "://", an unknown scheme-like prefix ("http:", "file:",
// "script:"), an empty name, a missing or invalid script, an invalid base
// URL, or no key for OpenAI is a *SpecError. ctx bounds only the start-up.
func Open(ctx context.Context, spec string, cfg OpenConfig) (model agent.Model, name string, closeFn func() error, err error) {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	spec = strings.TrimSpace(spec)
	if spec == "" {
		// The default model may be any spec, scripted:FILE included.
		spec = strings.TrimSpace(getenv(EnvModel))
	}
	lower := strings.ToLower(spec)
	switch {
	case strings.Contains(spec, "://"):
		return nil, "", nil, &SpecError{Spec: spec, Reason: "looks like a URL; set " + EnvBaseURL + " to the endpoint and pass a model name"}
	case strings.ContainsAny(spec, " \t\n"):
		return nil, "", nil, &SpecError{Spec: spec, Reason: "a model name has no spaces"}
	case strings.HasPrefix(lower, "scripted:"):
		return openScripted(ctx, spec, spec[len("scripted:"):], cfg)
	case strings.HasPrefix(lower, "openai:"):
		name = spec[len("openai:"):]
		if name == "" {
			return nil, "", nil, &SpecError{Spec: spec, Reason: "no model name after openai:"}
		}
	default:
		for _, p := range []string{"http:", "https:", "file:", "script:"} {
			if strings.HasPrefix(lower, p) {
				return nil, "", nil, &SpecError{Spec: spec, Reason: "unknown scheme " + strings.TrimSuffix(p, ":") + " (use scripted:FILE or a model name)"}
			}
		}
		name = spec
	}
	if name == "" {
		name = getenv(EnvModel)
	}
	if name == "" {
		name = DefaultModel
	}
	return openEndpoint(spec, name, cfg, getenv)
}

func openEndpoint(spec, name string, cfg OpenConfig, getenv func(string) string) (agent.Model, string, func() error, error) {
	c := cfg.Client
	if c.BaseURL == "" {
		c.BaseURL = getenv(EnvBaseURL)
	}
	if c.BaseURL == "" {
		c.BaseURL = DefaultBaseURL
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, "", nil, &SpecError{Spec: spec, Reason: EnvBaseURL + " must be an absolute http(s) URL, e.g. " + DefaultBaseURL}
	}
	if c.APIKey == "" {
		c.APIKey = getenv(EnvAPIKey)
	}
	if c.APIKey == "" {
		c.APIKey = getenv(EnvOpenAIKey)
	}
	if c.APIKey == "" && strings.EqualFold(u.Hostname(), "api.openai.com") {
		return nil, "", nil, &SpecError{Spec: spec, Reason: "no API key: set " + EnvAPIKey + " (or " + EnvOpenAIKey + "), or point " + EnvBaseURL + " at an endpoint that needs none"}
	}
	if c.Model == "" {
		c.Model = name
	}
	client, err := New(c)
	if err != nil {
		return nil, "", nil, &SpecError{Spec: spec, Reason: "invalid client configuration", Err: err}
	}
	return client, name, func() error { return nil }, nil
}

func openScripted(ctx context.Context, spec, path string, cfg OpenConfig) (agent.Model, string, func() error, error) {
	if path == "" {
		return nil, "", nil, &SpecError{Spec: spec, Reason: "no script file after scripted:"}
	}
	s, err := scripted.Load(path)
	if err != nil {
		return nil, "", nil, &SpecError{Spec: spec, Reason: "cannot use the script", Err: err}
	}
	opts := cfg.ScriptOptions
	if cfg.Client.Logger != nil {
		opts = append([]scripted.Option{scripted.WithLogger(cfg.Client.Logger)}, opts...)
	}
	srv, err := scripted.Start(ctx, s, scripted.DefaultAddr, opts...)
	if err != nil {
		return nil, "", nil, fmt.Errorf("open %s: %w", spec, err)
	}
	name := s.Model
	if name == "" {
		name = ScriptedModelName
	}
	c := cfg.Client
	c.BaseURL, c.APIKey, c.Model = srv.URL(), "", name
	client, err := New(c)
	if err != nil {
		_ = srv.Close()
		return nil, "", nil, fmt.Errorf("open %s: %w", spec, err)
	}
	return client, name, srv.Close, nil
}
