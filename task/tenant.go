package task

import "regexp"

// DefaultTenant is the tenant of a task that nothing else assigns one: no
// tenant in the policy claims its token, GitHub owner or repository, or it
// came without one (a message queued before tenants existed, or published
// by hand). The policy may give it limits like any other tenant.
const DefaultTenant = "default"

// MaxTenants bounds how many tenants a policy may name (the default one
// included), so that a tenant label stays a bounded set.
const MaxTenants = 64

// tenantPattern is a tenant name: lower-case letters, digits, '-' and '_',
// at most 32, starting with a letter or digit. It is a NATS subject token
// and a metric label value as it stands.
var tenantPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// ValidTenant reports whether name is a valid tenant name.
func ValidTenant(name string) bool { return tenantPattern.MatchString(name) }

// TenantName is the task's tenant, DefaultTenant when it has none.
func (t Task) TenantName() string {
	if t.Tenant == "" {
		return DefaultTenant
	}
	return t.Tenant
}
