package policy

import (
	"reflect"
	"testing"

	"github.com/wrenchworks/wrench/task"
)

// TestBudgetAccounts: a repository's daily budget comes from the rule for
// its URL laid over the defaults; each repository is its own account,
// named so that spellings of one URL share it; a tenant's budget is one
// more account for its tasks; none without a budget.
func TestBudgetAccounts(t *testing.T) {
	p := loadExample(t)
	none, err := Parse([]byte("defaults: {}\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	repo := func(d float64, name string) []task.BudgetAccount {
		return []task.BudgetAccount{{Scope: task.BudgetRepository, Name: name, DailyUSD: d}}
	}
	payments := append(repo(100, "https://github.com/acme/payments-api"), task.BudgetAccount{Scope: task.BudgetTenant, Name: "payments", DailyUSD: 150})
	for _, c := range []struct {
		pol    *Policy
		url    string
		tenant string
		want   []task.BudgetAccount
	}{
		{p, "https://github.com/acme/web", "", repo(20, "https://github.com/acme/web")},
		{p, "https://x-access-token:s3cret@github.com/Acme/Web.git", "default", repo(20, "https://github.com/acme/web")},
		{p, "https://github.com/acme/payments-api/", "payments", payments},
		{none, "https://github.com/acme/web", "payments", nil},
	} {
		got := c.pol.BudgetAccounts(task.Task{Repo: task.Repo{URL: c.url}, Tenant: c.tenant})
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.url, got, c.want)
		}
	}
}
