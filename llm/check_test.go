package llm_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/llm"
	"github.com/wrenchworks/wrench/llm/scripted"
)

func TestCheck(t *testing.T) {
	srv, err := scripted.Start(context.Background(), &scripted.Script{Model: "my-model"}, "", scripted.WithAPIKey("sk-good-key-1234"))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := "http://" + ln.Addr().String() + "/v1"
	ln.Close()
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name     string
		spec     string
		getenv   func(string) string
		summary  string
		problem  string
		warning  string
		accepted bool
	}{
		{"all good", "my-model", env(llm.EnvBaseURL, srv.URL(), llm.EnvAPIKey, "sk-good-key-1234"),
			"my-model at " + srv.URL() + " (key from WRENCH_LLM_API_KEY): the model is offered", "", "", true},
		{"model from the environment, key from OPENAI_API_KEY", "", env(llm.EnvBaseURL, srv.URL(), llm.EnvModel, "my-model", llm.EnvOpenAIKey, "sk-good-key-1234"),
			"(key from OPENAI_API_KEY): the model is offered", "", "", true},
		{"wrong key", "my-model", env(llm.EnvBaseURL, srv.URL(), llm.EnvAPIKey, "sk-wrong-key-5678"),
			"key refused", "answered HTTP 401: the key from WRENCH_LLM_API_KEY was refused", "", false},
		{"model not offered", "gpt-9", env(llm.EnvBaseURL, srv.URL(), llm.EnvAPIKey, "sk-good-key-1234"),
			"answers", "", `does not list the model "gpt-9" (it lists 1: my-model)`, true},
		{"unreachable", "m", env(llm.EnvBaseURL, closed), "not reachable", "cannot reach " + closed, "", false},
		{"no key for OpenAI", "", env(), "gpt-4.1 at https://api.openai.com/v1", "no API key for https://api.openai.com/v1", "", false},
		{"bad base URL", "m", env(llm.EnvBaseURL, "localhost:8000"), "", "is not an absolute http(s) URL", "", false},
		{"bad script", "scripted:/no/such.yaml", env(), "scripted:/no/such.yaml", "/no/such.yaml", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := llm.Check(context.Background(), tc.spec, llm.OpenConfig{Getenv: tc.getenv})
			all := r.Summary()
			for _, f := range r.Problems {
				all += "\nproblem: " + f.Message + " / " + f.Fix
			}
			for _, f := range r.Warnings {
				all += "\nwarning: " + f.Message
			}
			if !strings.Contains(r.Summary(), tc.summary) || r.KeyAccepted != tc.accepted ||
				(tc.problem == "") != (len(r.Problems) == 0) || !strings.Contains(all, tc.problem) || !strings.Contains(all, tc.warning) {
				t.Errorf("report:\n%s", all)
			}
			if strings.Contains(all, "sk-good-key") || strings.Contains(all, "sk-wrong-key") {
				t.Errorf("the key shows in the report:\n%s", all)
			}
		})
	}
	good := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(good, []byte("steps: []\n"), 0o644)
	if r := llm.Check(context.Background(), "scripted:"+good, llm.OpenConfig{}); len(r.Problems) != 0 {
		t.Errorf("a good script: %+v", r.Problems)
	}
}
