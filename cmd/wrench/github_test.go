package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestServeGitHubWiring: the API refuses tasks that claim to come from
// GitHub, and the webhook is served, signature-checked, only with a secret.
func TestServeGitHubWiring(t *testing.T) {
	post := func(t *testing.T, url, body string, hdr map[string]string) int {
		t.Helper()
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	ghTask := `{"repo":{"url":"https://github.com/o/r.git"},"instruction":"x","source":{"kind":"github","issue":"o/r#1"}}`
	hook := map[string]string{"X-GitHub-Event": "ping", "X-GitHub-Delivery": "d1", "X-Hub-Signature-256": "sha256=00"}

	t.Run("no secret", func(t *testing.T) {
		ts := startServe(t, t.TempDir(), "", fakeRunner(nil))
		if code := post(t, ts.url+"/v1/tasks", ghTask, nil); code != http.StatusBadRequest {
			t.Errorf("API accepted a github-sourced task: %d", code)
		}
		if code := post(t, ts.url+"/webhooks/github", `{"zen":"x"}`, hook); code != http.StatusNotFound && code != http.StatusMethodNotAllowed {
			t.Errorf("webhook served without a secret: %d", code)
		}
	})
	t.Run("secret", func(t *testing.T) {
		ts := startServeWith(t, t.TempDir(), "", fakeRunner(nil), func(f *serveFlags) { f.githubSecret = "s3cret" })
		if code := post(t, ts.url+"/webhooks/github", `{"zen":"x"}`, hook); code != http.StatusUnauthorized {
			t.Errorf("webhook with a bad signature: %d, want 401", code)
		}
	})
}
