package agent_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/task"
)

// capBudget is a Budget with one cap: a call is refused when what was
// spent and held plus its worst case would pass the cap. It records every
// reservation and settlement.
type capBudget struct {
	mu      sync.Mutex
	cap     float64
	spent   float64
	held    float64
	worst   []float64 // reserved, in call order
	settled []float64
	err     error // returned by Reserve instead, when set
}

type capHold struct {
	b     *capBudget
	worst float64
}

func (b *capBudget) Reserve(_ context.Context, usd float64) (agent.BudgetHold, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return nil, b.err
	}
	if b.spent+b.held+usd > b.cap {
		return nil, &task.OverBudgetError{Account: task.BudgetAccount{Scope: task.BudgetRepository, Name: "r", DailyUSD: b.cap},
			Day: "2030-01-02", SpentUSD: b.spent + b.held, NeedUSD: usd}
	}
	b.held += usd
	b.worst = append(b.worst, usd)
	return &capHold{b: b, worst: usd}, nil
}

func (h *capHold) Settle(_ context.Context, usd float64) error {
	h.b.mu.Lock()
	defer h.b.mu.Unlock()
	h.b.held -= h.worst
	h.b.spent += usd
	h.b.settled = append(h.b.settled, usd)
	return nil
}

// budgetPrices make one fake call (100 tokens in, 10 out) cost $0.02 and
// a 100-token output cap $0.10.
var budgetPrices = map[string]agent.Price{"scripted": {InputPerMTok: 100, OutputPerMTok: 1000}}

// TestBudgetPausesTheRun: every call reserves its worst case (the prompt
// at the input price plus the output cap, which the request carries, at
// the output price) and settles what it cost. The call that would cross
// the cap is not made: the run ends with StopBudget, the turn it would
// have started not counted, after a last save point at that turn. A run
// resumed from it under a raised cap finishes, and the spend of both adds
// up to the usage.
func TestBudgetPausesTheRun(t *testing.T) {
	cfg := agent.Config{Prices: budgetPrices, MaxOutputTokens: 100}
	b := &capBudget{cap: 0.35}
	r, m := newRun(memenv.New(nil), busy(6)...)
	r.Verify, r.Budget = agent.VerifyNever, b
	var saves []agent.SavePoint
	r.OnSave = func(sp agent.SavePoint) { saves = append(saves, sp) }
	out, err := agent.New(cfg).Run(context.Background(), r)
	if err != nil || out.Reason != agent.StopBudget || !errors.Is(out.Err, task.ErrOverBudget) {
		t.Fatalf("outcome %v (%v) %v, want budget", out.Reason, out.Err, err)
	}
	calls := len(m.requests())
	if calls == 0 || calls >= 6 || len(b.settled) != calls || len(b.worst) != calls {
		t.Fatalf("%d calls, %d reserved, %d settled: want the cap to stop the run early, each call reserved and settled", calls, len(b.worst), len(b.settled))
	}
	for i, req := range m.requests() {
		if req.MaxTokens != 100 {
			t.Errorf("call %d asks for at most %d output tokens, want the cap 100", i+1, req.MaxTokens)
		}
		if b.worst[i] < 0.1+0.01 || b.settled[i] != 0.02 {
			t.Errorf("call %d reserved $%g and settled $%g; want at least the output cap's $0.10 plus a prompt, and $0.02", i+1, b.worst[i], b.settled[i])
		}
	}
	if out.Usage.Turns != calls || out.Usage.CostUSD != b.spent || b.held != 0 {
		t.Errorf("usage %+v, budget spent $%g held $%g; want %d turns, the spend settled, nothing held", out.Usage, b.spent, b.held, calls)
	}
	if len(saves) == 0 {
		t.Fatal("no save point")
	}
	last := saves[len(saves)-1]
	if last.Turn != calls || last.Usage.ModelCalls != calls || len(last.Messages) != len(out.Messages) {
		t.Fatalf("last save point at turn %d (%d calls, %d messages); want turn %d with the whole conversation (%d)", last.Turn, last.Usage.ModelCalls, len(last.Messages), calls, len(out.Messages))
	}

	// Raised: the run continues from the save point and finishes.
	b.mu.Lock()
	b.cap = 10
	b.mu.Unlock()
	r2, m2 := newRun(memenv.New(map[string]string{"work.txt": "x"}), finish("done"))
	r2.Verify, r2.Budget, r2.Resume, r2.Spent = agent.VerifyNever, b, &last, last.Usage
	out2, err := agent.New(cfg).Run(context.Background(), r2)
	if err != nil || out2.Reason != agent.StopFinished {
		t.Fatalf("resumed: %v %v", out2.Reason, err)
	}
	if len(m2.requests()[0].Messages) != len(last.Messages) {
		t.Errorf("the resumed run's first call sent %d messages, want the saved %d", len(m2.requests()[0].Messages), len(last.Messages))
	}
	if out2.Usage.ModelCalls != calls+1 || out2.Usage.CostUSD != b.spent || out2.Usage.Turns != calls+1 {
		t.Errorf("usage after resuming %+v, budget spent $%g: want both runs' calls and cost", out2.Usage, b.spent)
	}
}

// A Budget that cannot be reached ends the run as an infrastructure
// failure (env_error: the task is delivered again), not a pause; without a
// Budget no request carries an output cap.
func TestBudgetLedgerDown(t *testing.T) {
	r, m := newRun(memenv.New(nil), finish("done"))
	r.Budget = &capBudget{cap: 1, err: errors.New("nats: timeout")}
	out, err := agent.New(agent.Config{Prices: budgetPrices}).Run(context.Background(), r)
	if err != nil || out.Reason != agent.StopEnvError || len(m.requests()) != 0 {
		t.Fatalf("outcome %v (%v) after %d calls, want env_error before any", out.Reason, out.Err, len(m.requests()))
	}
	r, m = newRun(memenv.New(nil), finish("done"))
	r.Verify = agent.VerifyNever
	if _, err := agent.New(agent.Config{Prices: budgetPrices}).Run(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if got := m.requests()[0].MaxTokens; got != 0 {
		t.Errorf("without a budget the request caps output at %d", got)
	}
}
