package main

import (
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// `wrench status` says where a task resumed and how many attempts workers
// handed back through no fault of the task.
func TestStatusTextSaysResumedAndHandedBack(t *testing.T) {
	now := time.Now()
	st := task.Status{TaskID: "t1", State: task.StateResolved, CreatedAt: now, Attempt: 3,
		Result: &task.Result{Status: task.StateResolved, Reason: "finished", Attempt: 3, HandedBack: 1,
			Resumed: "resumed at turn 5 after worker w1 stopped responding on attempt 1"}}
	out := statusText(st, now)
	for _, want := range []string{"resumed at turn 5 after worker w1 stopped responding on attempt 1", "1 attempt(s) handed back"} {
		if !strings.Contains(out, want) {
			t.Errorf("status text lacks %q:\n%s", want, out)
		}
	}
}

// `wrench status` names a task's tenant, unless it is the default one.
func TestStatusTextNamesTheTenant(t *testing.T) {
	now := time.Now()
	st := task.Status{TaskID: "t1", State: task.StateQueued, CreatedAt: now,
		Task: &task.Task{Repo: task.Repo{URL: "https://x/y"}, Instruction: "fix", Tenant: "payments"}}
	if out := statusText(st, now); !strings.Contains(out, "tenant payments") {
		t.Errorf("status text lacks the tenant:\n%s", out)
	}
	st.Task.Tenant = task.DefaultTenant
	if out := statusText(st, now); strings.Contains(out, "tenant") {
		t.Errorf("status text names the default tenant:\n%s", out)
	}
}

// `wrench status` of a paused task says which budget paused it, what its
// next call needs, how it continues, and what it spent so far.
func TestStatusTextSaysPaused(t *testing.T) {
	now := time.Now()
	p := &task.Pause{Reason: task.ReasonBudget, Account: task.BudgetAccount{Scope: task.BudgetRepository, Name: "https://example.com/r", DailyUSD: 5},
		Day: "2030-01-02", SpentUSD: 4.99, NeedUSD: 0.2, At: now}
	st := task.Status{TaskID: "t1", State: task.StatePaused, Reason: task.ReasonBudget, CreatedAt: now, Attempt: 1, Pause: p,
		Spent: &task.Usage{InputTokens: 9000, OutputTokens: 1000, CostUSD: 0.5, ModelCalls: 7}}
	out := statusText(st, now)
	for _, want := range []string{"t1  paused (budget)",
		"paused: repository https://example.com/r had spent or held $4.9900 of its $5.00 daily budget on 2030-01-02 (UTC)",
		"continues once that budget has $0.2000 left", "wrench resume t1", "spent so far: 10.0k tokens, $0.5000 over 7 model calls"} {
		if !strings.Contains(out, want) {
			t.Errorf("status text lacks %q:\n%s", want, out)
		}
	}
}
