package main

import (
	"slices"
	"testing"
)

// Values given by flags are redacted like those given by the environment:
// `serve --token …` and `--github-token …` once left them out (only the
// environment variables were read), so a task that printed one kept it.
func TestSecretFlagsAreRedacted(t *testing.T) {
	env := &cliEnv{getenv: func(k string) string {
		if k == "WRENCH_LLM_API_KEY" {
			return "sk-from-the-environment"
		}
		return ""
	}}
	var f serveFlags
	f.token, f.githubSecret, f.service.github.token = "api-token-from-flag", "webhook-secret-from-flag", "ghp_token_from_flag"
	got := f.workerOptions(nil, true).secrets(env)
	for _, want := range []string{"sk-from-the-environment", "api-token-from-flag", "webhook-secret-from-flag", "ghp_token_from_flag"} {
		if !slices.Contains(got, want) {
			t.Errorf("serve: redacted %q, want %q among them", got, want)
		}
	}
	worker := serviceFlags{github: githubFlags{token: "ghp_worker_flag"}}
	if got := worker.workerOptions(nil, true).secrets(env); !slices.Contains(got, "ghp_worker_flag") {
		t.Errorf("worker: redacted %q, want its --github-token among them", got)
	}
	// Short values would garble ordinary text; a value is listed once.
	if got := secrets(env, "abc", "sk-from-the-environment", ""); len(got) != 1 {
		t.Errorf("secrets = %q, want the environment's key once", got)
	}
}
