package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"github.com/wrenchworks/wrench/task"
)

// Tenant is whom tasks run for: a team or customer sharing the
// deployment. The server assigns every task a tenant ([Policy.Tenant]);
// tenants share the work queue fairly, and each may have a cluster-wide
// limit on the tasks it runs at once.
type Tenant struct {
	// Name is the tenant's name ([task.ValidTenant]): it appears in task
	// statuses and results, logs and metric labels.
	Name string `yaml:"name" json:"name"`
	// Tokens are API bearer tokens that submit as this tenant. Each is
	// accepted by the API like serve's own --token.
	Tokens []TenantToken `yaml:"tokens,omitempty" json:"tokens,omitempty"`
	// GitHub are GitHub owners (organisation or user logins) whose
	// webhook tasks belong to this tenant.
	GitHub []string `yaml:"github,omitempty" json:"github,omitempty"`
	// Repositories are URL patterns (as a rule's match) whose tasks belong
	// to this tenant when no token or GitHub owner decided.
	Repositories []string `yaml:"repositories,omitempty" json:"repositories,omitempty"`
	// MaxRunning caps the tenant's tasks running at once across every
	// worker sharing the queue; 0 is no cap.
	MaxRunning int `yaml:"max_running,omitempty" json:"max_running,omitempty"`
	// Budget caps the model spend of all the tenant's tasks per day
	// (see [Policy.BudgetAccounts]).
	Budget Budget `yaml:"budget,omitempty" json:"budget,omitempty"`
}

// TenantToken is an API token of a tenant, given by exactly one of: the
// server's environment variable holding it, a file holding it, or its
// SHA-256 (hex), so that the policy file itself holds no secret.
type TenantToken struct {
	Env    string `yaml:"env,omitempty" json:"env,omitempty"`
	File   string `yaml:"file,omitempty" json:"file,omitempty"`
	SHA256 string `yaml:"sha256,omitempty" json:"sha256,omitempty"`
}

// Who is what the server knows of a task's submitter when it assigns the
// task's tenant.
type Who struct {
	// TokenTenant is the tenant whose API token authenticated the request
	// ([Tokens.Lookup]); "" when none did.
	TokenTenant string
	// GitHubOwner is the owner of the repository a webhook task came
	// from; "" for other tasks.
	GitHubOwner string
	// Repo is the task's repository URL.
	Repo string
}

// Tenant assigns a task's tenant: the tenant of the API token that
// submitted it, else the first tenant listing its GitHub owner, else the
// first whose repositories match its URL, else [task.DefaultTenant]. The
// client never chooses it.
func (p *Policy) Tenant(w Who) string {
	if w.TokenTenant != "" {
		return w.TokenTenant
	}
	if w.GitHubOwner != "" {
		for _, t := range p.Tenants {
			for _, o := range t.GitHub {
				if strings.EqualFold(o, w.GitHubOwner) {
					return t.Name
				}
			}
		}
	}
	for _, t := range p.Tenants {
		for _, m := range t.Repositories {
			if MatchURL(m, w.Repo) {
				return t.Name
			}
		}
	}
	return task.DefaultTenant
}

// TenantLimit is the cluster-wide cap on tenant's running tasks (0: none).
func (p *Policy) TenantLimit(tenant string) int {
	for _, t := range p.Tenants {
		if t.Name == tenant {
			return t.MaxRunning
		}
	}
	return 0
}

// RepoLimit is the cluster-wide cap on a repository's running tasks, from
// the rule for its URL (0: none).
func (p *Policy) RepoLimit(repoURL string) int { return p.For(repoURL).MaxRunning }

// HasRunningLimits reports whether the policy limits the tasks running at
// once anywhere (max_running of a tenant, of the defaults or of a
// repository rule).
func (p *Policy) HasRunningLimits() bool {
	if p.Defaults.MaxRunning > 0 {
		return true
	}
	for _, r := range p.Repositories {
		if r.MaxRunning > 0 {
			return true
		}
	}
	for _, t := range p.Tenants {
		if t.MaxRunning > 0 {
			return true
		}
	}
	return false
}

// Tokens maps API tokens to their tenants. The zero value maps none.
type Tokens struct {
	bySum map[[sha256.Size]byte]string
}

// Lookup returns the tenant whose token this is.
func (k *Tokens) Lookup(token string) (tenant string, ok bool) {
	if k == nil || token == "" {
		return "", false
	}
	tenant, ok = k.bySum[sha256.Sum256([]byte(token))]
	return tenant, ok
}

// Len is how many tokens are known.
func (k *Tokens) Len() int {
	if k == nil {
		return 0
	}
	return len(k.bySum)
}

// TenantTokens reads the tenants' tokens (from the server's environment
// through getenv, or files). A token that cannot be read, or that two
// tenants share, is an error naming it, never a token dropped.
func (p *Policy) TenantTokens(getenv func(string) string) (*Tokens, error) {
	k := &Tokens{bySum: map[[sha256.Size]byte]string{}}
	for _, t := range p.Tenants {
		for i, tok := range t.Tokens {
			where := fmt.Sprintf("tenant %s: tokens[%d]", t.Name, i)
			var sum [sha256.Size]byte
			switch {
			case tok.SHA256 != "":
				b, _ := hex.DecodeString(tok.SHA256) // checked by Parse
				copy(sum[:], b)
			case tok.Env != "":
				v := getenv(tok.Env)
				if v == "" {
					return nil, fmt.Errorf("%s: $%s is empty or unset", where, tok.Env)
				}
				sum = sha256.Sum256([]byte(v))
			default:
				b, err := os.ReadFile(tok.File)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", where, err)
				}
				v := strings.TrimRight(string(b), "\r\n")
				if v == "" {
					return nil, fmt.Errorf("%s: %s is empty", where, tok.File)
				}
				sum = sha256.Sum256([]byte(v))
			}
			if other, dup := k.bySum[sum]; dup && other != t.Name {
				return nil, fmt.Errorf("%s: the same token belongs to tenant %s", where, other)
			}
			k.bySum[sum] = t.Name
		}
	}
	return k, nil
}

// checkTenants checks the tenants section.
func (p *Policy) checkTenants() error {
	if len(p.Tenants) > task.MaxTenants {
		return &Error{Problem: fmt.Sprintf("tenants: at most %d", task.MaxTenants)}
	}
	seen := map[string]bool{}
	for i, t := range p.Tenants {
		where := fmt.Sprintf("tenants[%d]", i)
		if !task.ValidTenant(t.Name) {
			return &Error{Problem: fmt.Sprintf("%s: name %q must be 1-32 lower-case letters, digits, '-' or '_'", where, t.Name)}
		}
		if seen[t.Name] {
			return &Error{Problem: fmt.Sprintf("%s: tenant %s is named twice", where, t.Name)}
		}
		seen[t.Name] = true
		if t.MaxRunning < 0 {
			return &Error{Problem: fmt.Sprintf("%s: max_running must not be negative", where)}
		}
		if t.Budget.DailyUSD < 0 {
			return &Error{Problem: fmt.Sprintf("%s.budget.daily_usd: %g is negative", where, t.Budget.DailyUSD)}
		}
		for j, tok := range t.Tokens {
			n := 0
			for _, s := range []string{tok.Env, tok.File, tok.SHA256} {
				if s != "" {
					n++
				}
			}
			if n != 1 {
				return &Error{Problem: fmt.Sprintf("%s.tokens[%d]: give exactly one of env, file or sha256", where, j)}
			}
			if b, err := hex.DecodeString(tok.SHA256); tok.SHA256 != "" && (err != nil || len(b) != sha256.Size) {
				return &Error{Problem: fmt.Sprintf("%s.tokens[%d]: sha256 must be 64 hex digits", where, j)}
			}
		}
	}
	return nil
}
