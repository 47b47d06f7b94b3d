package queue

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/task"
)

// Defaults of the budget ledger.
const (
	// DefaultBudgetHoldTTL is how long a reservation for a model call is
	// held before it counts as spent: longer than any one model call with
	// its retries (llm.DefaultRequestTimeout, four tries). A worker that
	// dies mid-call never settles its hold; the worst case it reserved
	// then counts.
	DefaultBudgetHoldTTL = 30 * time.Minute
	// budgetMaxAge is how long a day's ledger is kept after its last
	// write: only today's counts, the rest is for inspection.
	budgetMaxAge = 8 * 24 * time.Hour
	// budgetRetries bounds one ledger update's compare-and-set loop; every
	// model call of the deployment on one account writes the same key.
	budgetRetries = 200
)

// ledger is one account's record for one budget day, in micro-dollars so
// that sums are exact.
type ledger struct {
	Scope string `json:"scope"`
	Name  string `json:"name"`
	Day   string `json:"day"`
	// Spent is what settled calls cost, and what expired holds reserved.
	Spent int64 `json:"spent_micro_usd"`
	// Holds are the reservations of calls under way, by hold id.
	Holds map[string]hold `json:"holds,omitempty"`
}

type hold struct {
	Amount int64     `json:"micro_usd"`
	Until  time.Time `json:"until"`
}

// held sums the holds.
func (l *ledger) held() int64 {
	var n int64
	for _, h := range l.Holds {
		n += h.Amount
	}
	return n
}

// expire moves the holds that outlived their TTL into Spent.
func (l *ledger) expire(now time.Time) {
	for id, h := range l.Holds {
		if now.After(h.Until) {
			l.Spent += h.Amount
			delete(l.Holds, id)
		}
	}
}

// Budgets is the spend-ledger role of a [Conn]: per budget day and
// account (task.BudgetAccount), what the deployment's model calls spent
// and what calls under way hold. Every change is a compare-and-set on the
// account's key, so of two workers racing for an account's last dollars
// only one gets them. It is safe for concurrent use.
type Budgets struct{ c *Conn }

// BudgetHold is a reservation Reserve made; Settle ends it.
type BudgetHold struct {
	ID       string
	Day      string
	Accounts []task.BudgetAccount
}

// BudgetBalance is an account's day so far.
type BudgetBalance struct {
	SpentUSD float64
	// HeldUSD is reserved by calls under way.
	HeldUSD float64
}

// budgetKey is the ledger key of an account on a day: the day, the scope
// and a digest of the name (names are URLs, which keys cannot hold).
func budgetKey(day string, a task.BudgetAccount) string {
	sum := sha256.Sum256([]byte(a.Scope + "\x00" + a.Name))
	return day + "." + a.Scope + "." + hex.EncodeToString(sum[:20])
}

// micros converts dollars to micro-dollars, rounding up (a reservation or
// a cost is never under-counted).
func micros(usd float64) int64 { return int64(math.Ceil(math.Max(usd, 0)*1e6 - 1e-6)) }

func dollars(m int64) float64 { return float64(m) / 1e6 }

// Reserve holds usd, the worst-case cost of one model call, on every
// account for day, unless it would take one of them past its cap (what
// it spent plus what calls under way hold plus usd over DailyUSD): then
// nothing is held and the error is a *task.OverBudgetError naming that
// account. An account whose cap is 0 is not capped.
func (b *Budgets) Reserve(ctx context.Context, day string, accounts []task.BudgetAccount, usd float64) (BudgetHold, error) {
	h := BudgetHold{ID: holdID(), Day: day}
	need := micros(usd)
	for _, a := range accounts {
		var over *task.OverBudgetError
		err := b.update(ctx, day, a, func(l *ledger, now time.Time) bool {
			if a.DailyUSD > 0 && l.Spent+l.held()+need > micros(a.DailyUSD) {
				over = &task.OverBudgetError{Account: a, Day: day, SpentUSD: dollars(l.Spent + l.held()), NeedUSD: dollars(need)}
				return false
			}
			l.Holds[h.ID] = hold{Amount: need, Until: now.Add(b.c.cfg.BudgetHoldTTL)}
			return true
		})
		if err == nil && over != nil {
			err = over
		}
		if err != nil {
			// Give back what was held on the accounts before this one.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			_ = b.Settle(rctx, h, 0)
			cancel()
			return BudgetHold{}, err
		}
		h.Accounts = append(h.Accounts, a)
	}
	return h, nil
}

// Settle ends a hold: usd, what the call actually cost, counts as spent
// on each of its accounts, and the hold goes. A hold that expired
// meanwhile already counts as spent, at what it reserved.
func (b *Budgets) Settle(ctx context.Context, h BudgetHold, usd float64) error {
	cost := micros(usd)
	var errs []error
	for _, a := range h.Accounts {
		err := b.update(ctx, h.Day, a, func(l *ledger, _ time.Time) bool {
			if _, ok := l.Holds[h.ID]; !ok {
				return false
			}
			delete(l.Holds, h.ID)
			l.Spent += cost
			return true
		})
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Balance returns what account a spent and holds on day (zero for a day
// without calls).
func (b *Budgets) Balance(ctx context.Context, day string, a task.BudgetAccount) (BudgetBalance, error) {
	l, _, err := b.read(ctx, day, a)
	if err != nil {
		return BudgetBalance{}, err
	}
	l.expire(time.Now())
	return BudgetBalance{SpentUSD: dollars(l.Spent), HeldUSD: dollars(l.held())}, nil
}

// read returns the account's ledger for day and its revision (0: none
// yet).
func (b *Budgets) read(ctx context.Context, day string, a task.BudgetAccount) (ledger, uint64, error) {
	l := ledger{Scope: a.Scope, Name: a.Name, Day: day, Holds: map[string]hold{}}
	e, err := b.c.budget.Get(ctx, budgetKey(day, a))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return l, 0, nil
	}
	if err != nil {
		return l, 0, fmt.Errorf("read budget of %s for %s: %w", a, day, err)
	}
	if err := json.Unmarshal(e.Value(), &l); err != nil {
		return l, 0, fmt.Errorf("decode budget of %s for %s: %w", a, day, err)
	}
	if l.Holds == nil {
		l.Holds = map[string]hold{}
	}
	return l, e.Revision(), nil
}

// update applies fn to the account's ledger for day (expired holds moved
// to spent first) and writes it with compare-and-set, retrying on
// conflicts; fn returns false to write nothing.
func (b *Budgets) update(ctx context.Context, day string, a task.BudgetAccount, fn func(l *ledger, now time.Time) bool) error {
	key := budgetKey(day, a)
	for range budgetRetries {
		l, rev, err := b.read(ctx, day, a)
		if err != nil {
			return err
		}
		now := time.Now()
		l.expire(now)
		if !fn(&l, now) {
			return nil
		}
		data, err := json.Marshal(l)
		if err != nil {
			return fmt.Errorf("encode budget of %s: %w", a, err)
		}
		if rev == 0 {
			_, err = b.c.budget.Create(ctx, key, data)
		} else {
			_, err = b.c.budget.Update(ctx, key, data, rev)
		}
		if isConflict(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("write budget of %s for %s: %w", a, day, err)
		}
		return nil
	}
	return fmt.Errorf("write budget of %s for %s: too many concurrent updates", a, day)
}

func holdID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// budgetBucket binds the ledger bucket. It refuses writes once full
// rather than dropping old records: a lost record would forget a day's
// spend, so a full ledger fails model calls closed instead.
func (c *Conn) budgetBucket(ctx context.Context) (jetstream.KeyValue, error) {
	kc := jetstream.KeyValueConfig{
		Bucket:      BudgetBucket,
		Description: "Wrench daily model spend per repository and tenant",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    c.cfg.Replicas,
		TTL:         budgetMaxAge,
	}
	kv, err := c.js.KeyValue(ctx, BudgetBucket)
	if c.cfg.ApplyLayout || errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = c.js.CreateOrUpdateKeyValue(ctx, kc)
	}
	if err != nil {
		return nil, fmt.Errorf("bind kv %s: %w", BudgetBucket, err)
	}
	return kv, nil
}
