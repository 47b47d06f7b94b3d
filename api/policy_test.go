package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/policy"
)

// An API client can narrow what the server policy allows, never widen it:
// the hostile review read /etc/shadow through `model: scripted:/etc/shadow`,
// turned the network on, asked for 4,000,000 pids and 1 TB of memory, named
// any local image and cloned from the server's disk. Each is now a 400
// naming the field; a refused repository is a 403; nothing is queued.
func TestHostileClient_PolicyAtTheAPI(t *testing.T) {
	pol := policy.Default(policy.Options{Loopback: false}) // an API beyond loopback
	pol.Repositories = []policy.Rule{{Match: "https://evil.example/*", Allow: new(bool), Reason: "not ours"}}
	f := newFake()
	srv := newTestServer(t, f, func(c *Config) { c.Admit = pol.Admit })
	const repo = `"repo":{"url":"https://example.com/r.git"},"instruction":"x"`
	for _, tc := range []struct {
		name, body string
		code       int
		field      string
	}{
		{"scripted model reads a server file", `{` + repo + `,"model":"scripted:/etc/shadow"}`, 400, "model"},
		{"network on", `{` + repo + `,"sandbox":{"network":"bridge"}}`, 400, "sandbox.network"},
		{"pids", `{` + repo + `,"sandbox":{"pids":4000000}}`, 400, "sandbox.pids"},
		{"memory", `{` + repo + `,"sandbox":{"memory_mb":1000000}}`, 400, "sandbox.memory_mb"},
		{"any local image", `{` + repo + `,"image":"alpine:latest"}`, 400, "image"},
		{"a path on the server", `{"repo":{"url":"/etc"},"instruction":"x"}`, 400, "repo.url"},
		{"file URL", `{"repo":{"url":"file:///srv/private.git"},"instruction":"x"}`, 400, "repo.url"},
		{"turns", `{` + repo + `,"limits":{"max_turns":100000}}`, 400, "limits.max_turns"},
		{"refused repository", `{"repo":{"url":"https://evil.example/x.git"},"instruction":"x"}`, 403, ""},
		{"narrowing is fine", `{` + repo + `,"sandbox":{"pids":64,"memory_mb":512},"limits":{"max_turns":5}}`, 201, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := call(t, srv, http.MethodPost, "/v1/tasks", tc.body, nil)
			if a.code != tc.code {
				t.Fatalf("%d %s, want %d", a.code, a.body, tc.code)
			}
			if tc.field != "" && !strings.Contains(strings.Join(fieldNames(a.err.Fields), ","), tc.field) {
				t.Errorf("fields %v, want %s", a.err.Fields, tc.field)
			}
			if strings.Contains(a.body, "root:") {
				t.Errorf("answer carries file content: %s", a.body)
			}
		})
	}
	f.mu.Lock()
	n := len(f.tasks)
	f.mu.Unlock()
	if n != 1 {
		t.Errorf("%d tasks queued, want only the narrowing one", n)
	}
}
