package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/policy"
	"github.com/wrenchworks/wrench/task"
)

// The server assigns every task's tenant from the policy: the tenant of the
// bearer token, else the repository's, else the default; a tenant's token
// is accepted like serve's own; a client naming another tenant is refused
// and nothing is queued.
func TestServerAssignsTenant(t *testing.T) {
	pol, err := policy.Parse([]byte(`
tenants:
  - {name: payments, tokens: [{env: PAY}]}
  - {name: web, repositories: ["https://example.com/web*"]}
`), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	toks, err := pol.TenantTokens(func(string) string { return "pay-secret" })
	if err != nil {
		t.Fatal(err)
	}
	f := newFake()
	srv := newTestServer(t, f, func(c *Config) {
		c.Token = "admin-secret"
		c.TenantToken = toks.Lookup
		c.Tenant = func(tt string, tk task.Task) string {
			return pol.Tenant(policy.Who{TokenTenant: tt, Repo: tk.Repo.URL})
		}
	})
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	for _, tc := range []struct {
		name, token, body string
		code              int
		tenant            string
	}{
		{"tenant token", "pay-secret", `{"id":"a1","repo":{"url":"https://example.com/web.git"},"instruction":"x"}`, 201, "payments"},
		{"admin token, repository pattern", "admin-secret", `{"id":"a2","repo":{"url":"https://example.com/web.git"},"instruction":"x"}`, 201, "web"},
		{"admin token, unclaimed repository", "admin-secret", `{"id":"a3","repo":{"url":"https://example.com/other.git"},"instruction":"x"}`, 201, task.DefaultTenant},
		{"client names its own tenant", "pay-secret", `{"id":"a4","tenant":"payments","repo":{"url":"https://example.com/x.git"},"instruction":"x"}`, 201, "payments"},
		{"client names another tenant", "admin-secret", `{"id":"a5","tenant":"payments","repo":{"url":"https://example.com/x.git"},"instruction":"x"}`, 400, ""},
		{"wrong token", "nope", `{"id":"a6","repo":{"url":"https://example.com/x.git"},"instruction":"x"}`, 401, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := call(t, srv, http.MethodPost, "/v1/tasks", tc.body, bearer(tc.token))
			if a.code != tc.code {
				t.Fatalf("%d %s, want %d", a.code, a.body, tc.code)
			}
			if tc.code == 400 && !strings.Contains(strings.Join(fieldNames(a.err.Fields), ","), "tenant") {
				t.Errorf("fields %v, want tenant", a.err.Fields)
			}
			if tc.tenant != "" && !strings.Contains(a.body, `"tenant": "`+tc.tenant+`"`) {
				t.Errorf("answer does not carry tenant %s: %s", tc.tenant, a.body)
			}
		})
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.tasks["a5"]; ok {
		t.Error("a task naming another tenant was queued")
	}
	if got := f.tasks["a1"].Task.Tenant; got != "payments" {
		t.Errorf("queued task's tenant %q", got)
	}
}

// Without a tenant resolver every task is the default tenant's, and a
// client cannot pick another.
func TestServerDefaultTenant(t *testing.T) {
	f := newFake()
	srv := newTestServer(t, f, nil)
	a := call(t, srv, http.MethodPost, "/v1/tasks", `{"repo":{"url":"https://example.com/x.git"},"instruction":"x"}`, nil)
	if a.code != 201 || !strings.Contains(a.body, `"tenant": "default"`) {
		t.Fatalf("%d %s", a.code, a.body)
	}
	a = call(t, srv, http.MethodPost, "/v1/tasks", `{"tenant":"acme","repo":{"url":"https://example.com/x.git"},"instruction":"x"}`, nil)
	if a.code != 400 {
		t.Fatalf("client-chosen tenant: %d %s", a.code, a.body)
	}
}
