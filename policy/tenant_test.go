package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/task"
)

const tenantPolicy = `
defaults:
  max_running: 3
repositories:
  - match: "https://github.com/acme/big*"
    max_running: 1
tenants:
  - name: payments
    tokens: [{env: PAY_TOKEN}, {sha256: "%s"}]
    github: [Acme-Payments]
    repositories: ["https://github.com/acme/payments*"]
    max_running: 4
  - name: web
    repositories: ["https://github.com/acme/*"]
`

func parseTenants(t *testing.T) *Policy {
	t.Helper()
	sum := sha256.Sum256([]byte("hashed-token"))
	p, err := Parse([]byte(strings.Replace(tenantPolicy, "%s", hex.EncodeToString(sum[:]), 1)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTenantAssignment(t *testing.T) {
	p := parseTenants(t)
	cases := []struct {
		name string
		who  Who
		want string
	}{
		{"token wins over repository", Who{TokenTenant: "payments", Repo: "https://github.com/acme/web"}, "payments"},
		{"github owner, any case", Who{GitHubOwner: "acme-payments", Repo: "https://github.com/acme-payments/x"}, "payments"},
		{"first repository pattern", Who{Repo: "https://github.com/acme/payments-api.git"}, "payments"},
		{"later pattern", Who{Repo: "https://github.com/acme/web"}, "web"},
		{"nothing claims it", Who{Repo: "https://gitlab.com/x/y"}, task.DefaultTenant},
		{"unknown github owner falls to repository", Who{GitHubOwner: "other", Repo: "https://github.com/acme/web"}, "web"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := p.Tenant(c.who); got != c.want {
				t.Errorf("Tenant(%+v) = %q, want %q", c.who, got, c.want)
			}
		})
	}
	if Default(Options{}).Tenant(Who{Repo: "https://x/y"}) != task.DefaultTenant {
		t.Error("the built-in policy does not assign the default tenant")
	}
}

func TestTenantLimits(t *testing.T) {
	p := parseTenants(t)
	if got := p.TenantLimit("payments"); got != 4 {
		t.Errorf("payments limit %d, want 4", got)
	}
	if got := p.TenantLimit("web"); got != 0 {
		t.Errorf("web limit %d, want none", got)
	}
	if got := p.RepoLimit("https://github.com/acme/bigrepo"); got != 1 {
		t.Errorf("rule's repository limit %d, want 1", got)
	}
	if got := p.RepoLimit("https://github.com/acme/small"); got != 3 {
		t.Errorf("defaults' repository limit %d, want 3", got)
	}
	if got := Default(Options{}).RepoLimit("https://github.com/acme/small"); got != 0 {
		t.Errorf("built-in repository limit %d, want none", got)
	}
}

func TestTenantTokens(t *testing.T) {
	p := parseTenants(t)
	k, err := p.TenantTokens(func(v string) string {
		if v == "PAY_TOKEN" {
			return "env-token"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]string{"env-token": "payments", "hashed-token": "payments"} {
		if got, ok := k.Lookup(tok); !ok || got != want {
			t.Errorf("Lookup(%q) = %q, %v", tok, got, ok)
		}
	}
	if _, ok := k.Lookup("wrong"); ok {
		t.Error("an unknown token maps to a tenant")
	}
	if _, ok := k.Lookup(""); ok {
		t.Error("no token maps to a tenant")
	}
	if _, err := p.TenantTokens(func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "PAY_TOKEN") {
		t.Errorf("an unset token variable: want an error naming it, got %v", err)
	}
	file := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(file, []byte("env-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.Tenants = append(p.Tenants, Tenant{Name: "web2", Tokens: []TenantToken{{File: file}}})
	if _, err := p.TenantTokens(func(string) string { return "env-token" }); err == nil || !strings.Contains(err.Error(), "belongs to tenant payments") {
		t.Errorf("a token two tenants share: want an error, got %v", err)
	}
}

func TestTenantParseErrors(t *testing.T) {
	cases := map[string]string{
		"bad name":      "tenants: [{name: Acme}]\n",
		"dotted name":   "tenants: [{name: a.b}]\n",
		"named twice":   "tenants: [{name: a}, {name: a}]\n",
		"negative":      "tenants: [{name: a, max_running: -1}]\n",
		"two sources":   "tenants: [{name: a, tokens: [{env: X, file: /y}]}]\n",
		"no source":     "tenants: [{name: a, tokens: [{}]}]\n",
		"bad sha256":    "tenants: [{name: a, tokens: [{sha256: abc}]}]\n",
		"unknown field": "tenants: [{name: a, weight: 2}]\n",
		"negative repo": "defaults: {max_running: -2}\n",
	}
	for name, y := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(y), Options{})
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("want *Error, got %v", err)
			}
		})
	}
}

func TestExamplePolicyTenants(t *testing.T) {
	p := loadExample(t)
	if got := p.Tenant(Who{Repo: "https://github.com/acme/payments-api"}); got != "payments" {
		t.Errorf("example: payments repository is tenant %q", got)
	}
	if p.TenantLimit("default") != 8 {
		t.Errorf("example: default tenant's limit %d", p.TenantLimit("default"))
	}
}
