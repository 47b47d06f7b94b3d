package queue_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

var repoAccount = task.BudgetAccount{Scope: task.BudgetRepository, Name: "https://example.com/r", DailyUSD: 1}

// TestBudgetReserveRace: two connections (two workers) to one server, four
// goroutines each, reserve $0.07 at a time against a $1.00 cap until
// refused. Exactly 14 holds fit ($0.98); every other try is refused with
// the account named, whichever worker made it; settled at what they
// reserved, the day's spend is exactly the holds'.
func TestBudgetReserveRace(t *testing.T) {
	s := startNATS(t, t.TempDir())
	conns := []*queue.Conn{connect(t, s), connect(t, s)}
	ctx := context.Background()
	const day = "2030-01-02"
	var mu sync.Mutex
	var holds []queue.BudgetHold
	refused := 0
	var wg sync.WaitGroup
	for i := range 8 {
		b := conns[i%2].Budgets()
		wg.Go(func() {
			for {
				h, err := b.Reserve(ctx, day, []task.BudgetAccount{repoAccount}, 0.07)
				var over *task.OverBudgetError
				if errors.As(err, &over) {
					mu.Lock()
					refused++
					mu.Unlock()
					if over.Account != repoAccount || over.NeedUSD != 0.07 {
						t.Errorf("refusal names %+v", over)
					}
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				holds = append(holds, h)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(holds) != 14 || refused != 8 {
		t.Fatalf("%d holds and %d refusals; want 14 ($0.98 of $1.00) and one refusal per goroutine", len(holds), refused)
	}
	bal, err := conns[0].Budgets().Balance(ctx, day, repoAccount)
	if err != nil || bal.HeldUSD != 0.98 || bal.SpentUSD != 0 {
		t.Fatalf("balance %+v %v; want $0.98 held", bal, err)
	}
	for i, h := range holds {
		if err := conns[i%2].Budgets().Settle(ctx, h, 0.07); err != nil {
			t.Fatal(err)
		}
	}
	bal, err = conns[1].Budgets().Balance(ctx, day, repoAccount)
	if err != nil || bal.SpentUSD != 0.98 || bal.HeldUSD != 0 {
		t.Fatalf("balance %+v %v; want $0.98 spent", bal, err)
	}
}

// TestBudgetSettleFreesTheRest: a call that cost less than its worst case
// gives the difference back; days are separate ledgers.
func TestBudgetSettleFreesTheRest(t *testing.T) {
	c := connect(t, startNATS(t, t.TempDir()))
	b, ctx := c.Budgets(), context.Background()
	acc := []task.BudgetAccount{repoAccount}
	h, err := b.Reserve(ctx, "2030-01-02", acc, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Reserve(ctx, "2030-01-02", acc, 0.2); !errors.Is(err, task.ErrOverBudget) {
		t.Fatalf("$0.90 held of $1.00, another $0.20: %v, want over budget", err)
	}
	if _, err := b.Reserve(ctx, "2030-01-03", acc, 0.2); err != nil {
		t.Fatalf("the next day: %v", err)
	}
	if err := b.Settle(ctx, h, 0.3); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Reserve(ctx, "2030-01-02", acc, 0.7); err != nil {
		t.Fatalf("$0.30 spent of $1.00, another $0.70: %v", err)
	}
	if _, err := b.Reserve(ctx, "2030-01-02", acc, 0.000001); !errors.Is(err, task.ErrOverBudget) {
		t.Fatalf("a full day took one more micro-dollar: %v", err)
	}
}

// TestBudgetAllAccountsOrNone: a call is held on every account or on
// none: refused by the second account, it leaves nothing held on the
// first.
func TestBudgetAllAccountsOrNone(t *testing.T) {
	c := connect(t, startNATS(t, t.TempDir()))
	b, ctx := c.Budgets(), context.Background()
	tenant := task.BudgetAccount{Scope: task.BudgetTenant, Name: "acme", DailyUSD: 0.5}
	acc := []task.BudgetAccount{repoAccount, tenant}
	if _, err := b.Reserve(ctx, "2030-01-02", acc, 0.4); err != nil {
		t.Fatal(err)
	}
	_, err := b.Reserve(ctx, "2030-01-02", acc, 0.4)
	var over *task.OverBudgetError
	if !errors.As(err, &over) || over.Account != tenant || over.SpentUSD != 0.4 {
		t.Fatalf("got %v, want the tenant's cap refusing with $0.40 held", err)
	}
	bal, err := b.Balance(ctx, "2030-01-02", repoAccount)
	if err != nil || bal.HeldUSD != 0.4 {
		t.Fatalf("repository balance %+v %v; want only the first call's $0.40 held", bal, err)
	}
}

// TestBudgetHoldExpires: a hold nobody settles (its worker died mid-call)
// counts as spent at what it reserved once it expires; a late Settle
// changes nothing.
func TestBudgetHoldExpires(t *testing.T) {
	c := connect(t, startNATS(t, t.TempDir()), func(cfg *queue.Config) { cfg.BudgetHoldTTL = 100 * time.Millisecond })
	b, ctx := c.Budgets(), context.Background()
	h, err := b.Reserve(ctx, "2030-01-02", []task.BudgetAccount{repoAccount}, 0.25)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if bal, err := b.Balance(ctx, "2030-01-02", repoAccount); err != nil || bal.SpentUSD != 0.25 || bal.HeldUSD != 0 {
		t.Fatalf("expired hold: %+v %v; want $0.25 spent", bal, err)
	}
	if err := b.Settle(ctx, h, 0.01); err != nil {
		t.Fatal(err)
	}
	if bal, err := b.Balance(ctx, "2030-01-02", repoAccount); err != nil || bal.SpentUSD != 0.25 {
		t.Fatalf("after a late settle: %+v %v; want $0.25 spent", bal, err)
	}
}
