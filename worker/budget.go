package worker

import (
	"context"
	"errors"
	"time"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/task"
)

// Ledger is the deployment's record of daily model spend per budget
// account (the queue's budget ledger, in a service), shared by every
// worker.
type Ledger interface {
	// Reserve holds usd, one model call's worst case, on every account
	// for day, or on none: a *task.OverBudgetError when it would take one
	// of them past its cap.
	Reserve(ctx context.Context, day string, accounts []task.BudgetAccount, usd float64) (agent.BudgetHold, error)
	// Balance is what account a spent and holds on day.
	Balance(ctx context.Context, day string, a task.BudgetAccount) (spentUSD, heldUSD float64, err error)
}

// budgetGate is a run's agent.Budget: its task's accounts on the ledger,
// on the budget day of each call.
type budgetGate struct {
	ledger   Ledger
	accounts []task.BudgetAccount
	now      func() time.Time
}

func (g budgetGate) Reserve(ctx context.Context, usd float64) (agent.BudgetHold, error) {
	return g.ledger.Reserve(ctx, task.BudgetDay(g.now()), g.accounts, usd)
}

// budget is the task's agent.Budget: nil when no budget applies to it (the
// policy sets none, or the worker has no ledger).
func (r *taskRun) budget() agent.Budget {
	accounts := r.w.cfg.BudgetAccounts(r.t)
	if len(accounts) == 0 || r.w.cfg.Budgets == nil {
		return nil
	}
	return budgetGate{ledger: r.w.cfg.Budgets, accounts: accounts, now: r.w.cfg.Now}
}

// exhausted returns the first of the task's accounts that has nothing left
// today, before anything is cloned: such a task pauses at once. A ledger
// that cannot be read is left to the first model call to find.
func (r *taskRun) exhausted(ctx context.Context) *task.OverBudgetError {
	if r.w.cfg.Budgets == nil {
		return nil
	}
	day := task.BudgetDay(r.w.cfg.Now())
	for _, a := range r.w.cfg.BudgetAccounts(r.t) {
		spent, held, err := r.w.cfg.Budgets.Balance(ctx, day, a)
		if err != nil {
			r.log.Warn("read the budget ledger", "account", a.String(), "err", err)
			return nil
		}
		if spent+held >= a.DailyUSD {
			return &task.OverBudgetError{Account: a, Day: day, SpentUSD: spent + held}
		}
	}
	return nil
}

// pauseOf is the pause of a run that a budget stopped (nil otherwise).
func (r *taskRun) pauseOf(out *agent.Outcome) *task.Pause {
	var over *task.OverBudgetError
	if out.Reason != agent.StopBudget || !errors.As(out.Err, &over) {
		return nil
	}
	return task.PauseFor(over, r.w.cfg.Now())
}

// paused is the result of a task that pauses: its work so far stays (the
// patch, and the save point the agent left), and it is not final.
func paused(p *task.Pause) task.Result {
	return task.Result{Status: task.StatePaused, Reason: task.ReasonBudget + ": " + p.String()}
}
