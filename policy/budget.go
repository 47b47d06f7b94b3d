package policy

import (
	"strings"

	"github.com/wrenchworks/wrench/task"
)

// BudgetAccounts are the daily spend caps a task's model calls draw on:
// its repository's, when the rule for the repository's URL sets
// budget.daily_usd (each repository the rule matches has its own
// account), and its tenant's, when the tenant sets one. Every call draws
// on all of them.
func (p *Policy) BudgetAccounts(t task.Task) []task.BudgetAccount {
	var out []task.BudgetAccount
	if c := p.For(t.Repo.URL).Budget.DailyUSD; c > 0 {
		out = append(out, task.BudgetAccount{Scope: task.BudgetRepository, Name: RepositoryName(t.Repo.URL), DailyUSD: c})
	}
	name := t.TenantName()
	for _, tn := range p.Tenants {
		if tn.Name == name && tn.Budget.DailyUSD > 0 {
			out = append(out, task.BudgetAccount{Scope: task.BudgetTenant, Name: name, DailyUSD: tn.Budget.DailyUSD})
		}
	}
	return out
}

// RepositoryName is the name a repository's budget account goes by: its
// URL without credentials, lower case, without a trailing "/" or ".git",
// so that the spellings MatchURL takes as one repository share it.
func RepositoryName(url string) string {
	s := strings.ToLower(strings.TrimSpace(task.RedactURL(url)))
	return strings.TrimSuffix(strings.TrimSuffix(s, "/"), ".git")
}
