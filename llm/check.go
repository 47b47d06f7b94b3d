package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/llm/scripted"
)

// Finding is one thing [Check] found wrong, with what to do about it.
type Finding struct {
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

// CheckReport is what [Check] found out about the model a --model value
// names: where it is served, which variable gave the key (never the key),
// and whether the endpoint answers, accepts the key and offers the model.
type CheckReport struct {
	Spec    string `json:"spec"`
	Model   string `json:"model,omitempty"`
	BaseURL string `json:"base_url,omitempty"`
	// KeyFrom names the environment variable the key came from; empty when
	// there is none.
	KeyFrom string `json:"key_from,omitempty"`
	// Reachable says the endpoint answered GET /models; KeyAccepted that
	// it did with a success; Offered that the model is in its list.
	Reachable   bool `json:"reachable"`
	KeyAccepted bool `json:"key_accepted"`
	Offered     bool `json:"offered"`
	// Problems make tasks with this model fail; Warnings may.
	Problems []Finding `json:"problems"`
	Warnings []Finding `json:"warnings"`
}

// Summary is the report in one line.
func (r *CheckReport) Summary() string {
	switch {
	case r.BaseURL == "":
		return r.Spec
	case !r.Reachable:
		return fmt.Sprintf("%s at %s: not reachable", r.Model, r.BaseURL)
	}
	key := "no key"
	if r.KeyFrom != "" {
		key = "key from " + r.KeyFrom
	}
	state := "key refused"
	switch {
	case r.KeyAccepted && r.Offered:
		state = "the model is offered"
	case r.KeyAccepted:
		state = "answers"
	}
	return fmt.Sprintf("%s at %s (%s): %s", r.Model, r.BaseURL, key, state)
}

// Check looks at the model spec names without using it: it resolves the
// endpoint and key as [Open] does, then asks the endpoint's GET /models
// (with the key, bounded by ctx and 15 seconds). A scripted model's script
// is loaded and checked. It never returns an error: what it finds is in
// the report.
func Check(ctx context.Context, spec string, cfg OpenConfig) CheckReport {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	r := CheckReport{Spec: spec}
	spec = strings.TrimSpace(spec)
	if path, ok := strings.CutPrefix(spec, "scripted:"); ok {
		r.Model = ScriptedModelName
		if _, err := scripted.Load(path); err != nil {
			r.Problems = append(r.Problems, Finding{Message: err.Error(), Fix: "see docs/scripted-model.md"})
		}
		return r
	}
	name := strings.TrimPrefix(spec, "openai:")
	if name == "" {
		name = getenv(EnvModel)
	}
	if name == "" {
		name = DefaultModel
	}
	r.Model = name
	r.BaseURL = cfg.Client.BaseURL
	if r.BaseURL == "" {
		r.BaseURL = getenv(EnvBaseURL)
	}
	if r.BaseURL == "" {
		r.BaseURL = DefaultBaseURL
	}
	u, err := url.Parse(r.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		r.Problems = append(r.Problems, Finding{Message: fmt.Sprintf("%s %q is not an absolute http(s) URL", EnvBaseURL, r.BaseURL),
			Fix: "set " + EnvBaseURL + " to the endpoint, e.g. " + DefaultBaseURL})
		return r
	}
	key := cfg.Client.APIKey
	for _, v := range []string{EnvAPIKey, EnvOpenAIKey} {
		if key == "" && getenv(v) != "" {
			key, r.KeyFrom = getenv(v), v
		}
	}
	if key != "" && r.KeyFrom == "" {
		r.KeyFrom = "configuration"
	}
	if key == "" && strings.EqualFold(u.Hostname(), "api.openai.com") {
		r.Problems = append(r.Problems, Finding{Message: "no API key for " + r.BaseURL,
			Fix: "set " + EnvAPIKey + " (or " + EnvOpenAIKey + "), or point " + EnvBaseURL + " at an endpoint that needs none"})
		return r
	}
	r.listModels(ctx, cfg.Client.HTTPClient, key)
	return r
}

// listModels asks GET {base}/models and records what it says.
func (r *CheckReport) listModels(ctx context.Context, hc *http.Client, key string) {
	if hc == nil {
		hc = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(r.BaseURL, "/")+"/models", nil)
	if err != nil {
		r.Problems = append(r.Problems, Finding{Message: err.Error()})
		return
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := hc.Do(req)
	if err != nil {
		msg := err.Error()
		var ue *url.Error
		if errors.As(err, &ue) {
			msg = ue.Err.Error()
		}
		r.Problems = append(r.Problems, Finding{Message: fmt.Sprintf("cannot reach %s: %s", r.BaseURL, scrub(msg, key)),
			Fix: "check " + EnvBaseURL + " and that this machine can reach it (proxy, firewall)"})
		return
	}
	defer resp.Body.Close()
	r.Reachable = true
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		from := "no key was sent"
		if r.KeyFrom != "" {
			from = "the key from " + r.KeyFrom + " was refused"
		}
		r.Problems = append(r.Problems, Finding{Message: fmt.Sprintf("%s answered HTTP %d: %s", r.BaseURL, resp.StatusCode, from),
			Fix: "set " + EnvAPIKey + " to a key this endpoint accepts"})
		return
	case resp.StatusCode == http.StatusNotFound:
		r.KeyAccepted = true
		r.Warnings = append(r.Warnings, Finding{Message: r.BaseURL + " has no /models: the model name could not be checked"})
		return
	case resp.StatusCode >= 300:
		r.Problems = append(r.Problems, Finding{Message: fmt.Sprintf("%s/models answered HTTP %d", r.BaseURL, resp.StatusCode)})
		return
	}
	r.KeyAccepted = true
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		r.Warnings = append(r.Warnings, Finding{Message: r.BaseURL + "/models did not answer a model list: the model name could not be checked"})
		return
	}
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	if r.Offered = slices.Contains(ids, r.Model); !r.Offered {
		r.Warnings = append(r.Warnings, Finding{Message: fmt.Sprintf("%s does not list the model %q (it lists %d: %s)",
			r.BaseURL, r.Model, len(ids), clipList(ids, 8)), Fix: "pass --model with one it lists, or set " + EnvModel})
	}
}

// scrub removes the key from a message.
func scrub(msg, key string) string {
	if len(key) >= 4 {
		msg = strings.ReplaceAll(msg, key, "[REDACTED]")
	}
	return msg
}

func clipList(ids []string, n int) string {
	if len(ids) <= n {
		return strings.Join(ids, ", ")
	}
	return strings.Join(ids[:n], ", ") + ", …"
}

// KeyWarning says, without asking the network, when the environment leaves
// the default model unusable: the endpoint is OpenAI's (the default) and
// no key is set. It returns "" when a key is set or another endpoint is
// configured (local endpoints may need none), or the default model is a
// script (WRENCH_LLM_MODEL=scripted:FILE).
func KeyWarning(getenv func(string) string) string {
	if strings.HasPrefix(strings.ToLower(strings.TrimSpace(getenv(EnvModel))), "scripted:") {
		return ""
	}
	base := getenv(EnvBaseURL)
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || getenv(EnvAPIKey) != "" || getenv(EnvOpenAIKey) != "" || !strings.EqualFold(u.Hostname(), "api.openai.com") {
		return ""
	}
	return fmt.Sprintf("no model key: %s and %s are unset and the endpoint is %s, so tasks that name no scripted model will fail; "+
		"set %s, or %s for another endpoint (wrench doctor checks the endpoint and key)", EnvAPIKey, EnvOpenAIKey, base, EnvAPIKey, EnvBaseURL)
}
