package worker

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/policy"
	"github.com/wrenchworks/wrench/task"
)

// fakeLedger keeps what each account spent per day; a reservation counts
// at once (its settlement changes nothing).
type fakeLedger struct {
	mu    sync.Mutex
	spent map[string]float64 // day + " " + account name
	days  []string           // of every reservation
}

func (l *fakeLedger) Reserve(_ context.Context, day string, accounts []task.BudgetAccount, usd float64) (agent.BudgetHold, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.days = append(l.days, day)
	for _, a := range accounts {
		if s := l.spent[day+" "+a.Name]; s+usd > a.DailyUSD {
			return nil, &task.OverBudgetError{Account: a, Day: day, SpentUSD: s, NeedUSD: usd}
		}
	}
	for _, a := range accounts {
		l.spent[day+" "+a.Name] += usd
	}
	return fakeHold{}, nil
}

func (l *fakeLedger) Balance(_ context.Context, day string, a task.BudgetAccount) (float64, float64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.spent[day+" "+a.Name], 0, nil
}

type fakeHold struct{}

func (fakeHold) Settle(context.Context, float64) error { return nil }

// spender is an agent that reserves $0.40 per turn from its Budget for up
// to five turns, ending with StopBudget when refused.
type spender struct{ last *agent.Run }

func (s *spender) Run(ctx context.Context, r *agent.Run) (*agent.Outcome, error) {
	s.last = r
	for turn := 0; turn < 5; turn++ {
		if r.Budget == nil {
			break
		}
		if _, err := r.Budget.Reserve(ctx, 0.4); err != nil {
			return &agent.Outcome{Reason: agent.StopBudget, Err: err, Usage: task.Usage{Turns: turn, CostUSD: 0.4 * float64(turn)}}, nil
		}
	}
	return &agent.Outcome{Reason: agent.StopFinished, Usage: task.Usage{Turns: 5, CostUSD: 2}}, nil
}

// TestBudgetPausesTheTask: the policy's repository budget reaches the
// agent as its Budget, on the day of the worker's clock. A run it stops
// pauses the task (not a result: a paused state event, the pause saying
// which account and how much) with its work (the patch) kept and no final
// test run. A task whose account has nothing left pauses before anything
// is cloned. Without a budget in the policy the agent gets none.
func TestBudgetPausesTheTask(t *testing.T) {
	pol, err := policy.Parse([]byte("defaults:\n  local_paths: true\n  budget: {daily_usd: 1}\n"), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2030, 1, 2, 23, 59, 0, 0, time.UTC)
	ledger := &fakeLedger{spent: map[string]float64{}}
	src, envs, ag := &fakeSources{}, &fakeEnvironments{}, &spender{}
	w, _ := New(Config{Sources: src, Environments: envs, Models: fakeModels(nil), Agent: ag, Policy: pol, Budgets: ledger,
		Now: func() time.Time { return clock }})
	var events []task.Event
	rep := w.Run(context.Background(), testTask(), 1, func(ev task.Event) { events = append(events, ev) })
	p := rep.Pause
	if p == nil || rep.Result.Status != task.StatePaused || !strings.HasPrefix(rep.Result.Reason, "budget: repository /src/r had spent or held $0.8000 of its $1.00 daily budget on 2030-01-02") {
		t.Fatalf("report %+v (pause %+v); want paused by the repository's budget", rep.Result, p)
	}
	if p.Account.Scope != task.BudgetRepository || p.Day != "2030-01-02" || p.NeedUSD != 0.4 || rep.Retry {
		t.Errorf("pause %+v", p)
	}
	if rep.Result.Patch == "" || rep.Result.Usage.CostUSD != 0.8 || rep.Result.TestsAfter != nil {
		t.Errorf("result %+v: want the work so far, its spend, and no final test run", rep.Result)
	}
	last := events[len(events)-1]
	if last.Kind != task.EventState || last.State != task.StatePaused {
		t.Errorf("the attempt ended with a %s event (%s), want a paused state", last.Kind, last.State)
	}
	for _, ev := range events {
		if ev.Kind == task.EventResult {
			t.Errorf("a paused task published a result event: %+v", ev)
		}
	}

	// The next task on the repository: $0.20 left, less than any call.
	ledger.spent["2030-01-02 /src/r"] = 1
	src.opened, ag.last = nil, nil
	rep = w.Run(context.Background(), testTask(), 1, nil)
	if rep.Pause == nil || len(src.opened) != 0 || ag.last != nil {
		t.Fatalf("on a spent budget: pause %+v, %d clones, agent ran %v", rep.Pause, len(src.opened), ag.last != nil)
	}
	// The next day it runs, on the new day's budget (which it spends).
	clock = clock.Add(2 * time.Minute)
	rep = w.Run(context.Background(), testTask(), 1, nil)
	if ag.last == nil || len(src.opened) != 1 || rep.Pause == nil || rep.Pause.Day != "2030-01-03" || rep.Result.Usage.CostUSD != 0.8 {
		t.Fatalf("the next day: agent ran %v, %d clones, pause %+v", ag.last != nil, len(src.opened), rep.Pause)
	}

	w, _ = New(Config{Sources: &fakeSources{}, Environments: &fakeEnvironments{}, Models: fakeModels(nil), Agent: ag, Budgets: ledger})
	w.Run(context.Background(), testTask(), 1, nil)
	if ag.last == nil || ag.last.Budget != nil {
		t.Error("without a budget in the policy the agent got one")
	}
}
