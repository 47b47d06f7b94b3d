package task

import (
	"errors"
	"fmt"
	"time"
)

// ReasonBudget is the Status.Reason (and Pause.Reason) of a task paused
// because its next model call would cross a spend cap above it.
const ReasonBudget = "budget"

// The scopes of a budget account: whose daily spend it caps.
const (
	BudgetRepository = "repository"
	BudgetTenant     = "tenant"
)

// BudgetAccount is one spend cap that a task's model calls draw on: the
// daily budget of its repository or of its tenant. Every task on the same
// repository (or of the same tenant) shares the account.
type BudgetAccount struct {
	// Scope is BudgetRepository or BudgetTenant.
	Scope string `json:"scope"`
	// Name is the repository's URL (without credentials) or the tenant's
	// name.
	Name string `json:"name"`
	// DailyUSD is the cap on the account's model spend per budget day.
	DailyUSD float64 `json:"daily_usd"`
}

func (a BudgetAccount) String() string { return a.Scope + " " + a.Name }

// BudgetDay is the budget day t falls in: its UTC date, "2006-01-02".
// Daily budgets start afresh at midnight UTC.
func BudgetDay(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// ErrOverBudget is matched (errors.Is) by an *OverBudgetError.
var ErrOverBudget = errors.New("over budget")

// OverBudgetError is a model call refused because its worst-case cost
// would take an account past its daily cap.
type OverBudgetError struct {
	Account BudgetAccount
	// Day is the budget day (BudgetDay).
	Day string
	// SpentUSD is what the account had spent, and held for calls under
	// way, that day.
	SpentUSD float64
	// NeedUSD is the refused call's worst-case cost.
	NeedUSD float64
}

func (e *OverBudgetError) Error() string {
	return fmt.Sprintf("budget: %s has spent or holds $%.4f of its $%.2f daily budget for %s (UTC); the next model call may cost up to $%.4f",
		e.Account, e.SpentUSD, e.Account.DailyUSD, e.Day, e.NeedUSD)
}

// Is makes errors.Is(err, ErrOverBudget) hold.
func (e *OverBudgetError) Is(target error) bool { return target == ErrOverBudget }

// Pause is why a paused task waits, and what the attempt that continues it
// needs.
type Pause struct {
	// Reason is ReasonBudget.
	Reason string `json:"reason"`
	// Account is the budget the task's next model call would have crossed.
	Account BudgetAccount `json:"account"`
	// Day is the budget day it paused on (BudgetDay).
	Day string `json:"day"`
	// SpentUSD is what the account had spent or held that day; NeedUSD
	// the worst-case cost of the call it refused. The task continues once
	// the account has NeedUSD left (a raised cap or a new day).
	SpentUSD float64 `json:"spent_usd"`
	NeedUSD  float64 `json:"need_usd"`
	// At is when it paused.
	At time.Time `json:"at"`
	// Free counts the task's deliveries that do not count toward its
	// delivery limit, the paused one included: the message that
	// continues the task carries it.
	Free int `json:"free,omitempty"`
	// Artifacts names what the artifact store keeps of the work so far
	// (the patch, the log, the save point it continues from).
	Artifacts []string `json:"artifacts,omitempty"`
}

// PauseFor is the Pause of a call refused with e.
func PauseFor(e *OverBudgetError, at time.Time) *Pause {
	return &Pause{Reason: ReasonBudget, Account: e.Account, Day: e.Day, SpentUSD: e.SpentUSD, NeedUSD: e.NeedUSD, At: at.UTC()}
}

// String says why the task waits, in a line.
func (p Pause) String() string {
	return fmt.Sprintf("%s had spent or held $%.4f of its $%.2f daily budget on %s (UTC); the next model call may cost up to $%.4f",
		p.Account, p.SpentUSD, p.Account.DailyUSD, p.Day, p.NeedUSD)
}
