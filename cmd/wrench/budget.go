package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/policy"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
	"github.com/wrenchworks/wrench/telemetry"
	"github.com/wrenchworks/wrench/worker"
)

// Budgets in a service: the queue's ledger is the worker's (worker.Ledger,
// through the queueLink, which counts spend and refusals in the metrics),
// the budgets are the policy's as last loaded (SIGHUP loads --policy
// again), and serve's sweeper resumes paused tasks once their budget has
// room.

var _ worker.Ledger = (*queueLink)(nil)

// budgetState is the queueLink's part for budgets.
type budgetState struct {
	budgets *queue.Budgets
	pol     *policy.Policy
	reload  func() (*policy.Policy, error)
	// reloaded wakes serve's sweeper after a reload (made by setPolicy).
	reloaded chan struct{}
}

// setPolicy gives the link the policy budgets are read from, and how to
// load it again.
func (h *queueLink) setPolicy(p *policy.Policy, reload func() (*policy.Policy, error)) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.budget.pol, h.budget.reload = p, reload
	if h.budget.reloaded == nil {
		h.budget.reloaded = make(chan struct{}, 1)
	}
	h.mu.Unlock()
}

// accounts are the budget accounts of t under the policy as last loaded.
func (h *queueLink) accounts(t task.Task) []task.BudgetAccount {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	p := h.budget.pol
	h.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.BudgetAccounts(t)
}

// reloadPolicy loads --policy again for the budgets; a file that no longer
// loads keeps the budgets as they were.
func (h *queueLink) reloadPolicy(log *slog.Logger) {
	if h == nil {
		return
	}
	h.mu.Lock()
	reload := h.budget.reload
	h.mu.Unlock()
	if reload == nil {
		return
	}
	p, err := reload()
	if err != nil {
		log.Error("reload the policy: budgets unchanged", "err", err)
		return
	}
	h.mu.Lock()
	h.budget.pol = p
	wake := h.budget.reloaded
	h.mu.Unlock()
	log.Info("policy reloaded: budgets follow it now", "policy", p.File)
	select {
	case wake <- struct{}{}:
	default:
	}
}

// wake is what tells serve's sweeper the policy was reloaded.
func (h *queueLink) wake() <-chan struct{} {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.budget.reloaded
}

func (h *queueLink) ledger() (*queue.Budgets, *telemetry.Metrics) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.budget.budgets, h.metrics
}

// Reserve holds a model call's worst case on the ledger.
func (h *queueLink) Reserve(ctx context.Context, day string, accounts []task.BudgetAccount, usd float64) (agent.BudgetHold, error) {
	b, m := h.ledger()
	if b == nil {
		return nil, errNoQueue
	}
	hold, err := b.Reserve(ctx, day, accounts, usd)
	var over *task.OverBudgetError
	if errors.As(err, &over) && m != nil {
		m.BudgetRefused(over.Account.Scope)
	}
	if err != nil {
		return nil, err
	}
	return &ledgerHold{b: b, h: hold, m: m}, nil
}

// Balance reads an account's day.
func (h *queueLink) Balance(ctx context.Context, day string, a task.BudgetAccount) (float64, float64, error) {
	b, _ := h.ledger()
	if b == nil {
		return 0, 0, errNoQueue
	}
	bal, err := b.Balance(ctx, day, a)
	return bal.SpentUSD, bal.HeldUSD, err
}

// ledgerHold settles a hold and counts what it cost per scope.
type ledgerHold struct {
	b *queue.Budgets
	h queue.BudgetHold
	m *telemetry.Metrics
}

func (l *ledgerHold) Settle(ctx context.Context, usd float64) error {
	err := l.b.Settle(ctx, l.h, usd)
	if l.m != nil {
		for _, a := range l.h.Accounts {
			l.m.BudgetSpent(a.Scope, usd)
		}
	}
	return err
}

// budgetsOf is h as the worker's ledger; nil (no budgets) for a worker
// without a queue (`wrench run`).
func budgetsOf(h *queueLink) worker.Ledger {
	if h == nil {
		return nil
	}
	return h
}

// accountsOf is the worker's source of budget accounts: the link's policy
// as last loaded (nil: the worker's own policy).
func accountsOf(h *queueLink) func(task.Task) []task.BudgetAccount {
	if h == nil {
		return nil
	}
	return h.accounts
}

// watchPolicyReload reloads the link's policy on every SIGHUP until the
// returned stop is called.
func watchPolicyReload(ctx context.Context, h *queueLink, log *slog.Logger) (stop func()) {
	if h == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				h.reloadPolicy(log)
			}
		}
	})
	return func() {
		signal.Stop(hup)
		cancel()
		wg.Wait()
	}
}

// budgetSweepInterval is how often serve looks for paused tasks whose
// budget has room again.
const budgetSweepInterval = time.Minute

// startBudgetSweeper runs serve's budget sweep every interval, at once and
// after every policy reload, until the returned stop is called: paused tasks whose budget has
// room for their next call (a raised cap, a new UTC day) are resumed, and
// wrench_tasks_paused says how many still wait.
func startBudgetSweeper(ctx context.Context, subs *queue.Submissions, h *queueLink, m *telemetry.Metrics, log *slog.Logger,
	interval time.Duration, now func() time.Time) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			n, waiting, err := subs.ResumeWithinBudget(ctx, h.accounts, now())
			if n > 0 {
				m.TasksResumed(telemetry.ResumedByBudget, n)
				log.Info("paused tasks resumed: their budget has room again", "tasks", n)
			}
			if err != nil && ctx.Err() == nil {
				log.Warn("sweep paused tasks", "err", err)
			} else if err == nil {
				m.SetPaused(task.ReasonBudget, waiting)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			case <-h.wake():
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}
