package github

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Ledger is where the publisher records each external effect of a task (a
// pushed branch, a pull request, a label, a comment) so that it happens
// once, however many times and by however many workers the task is
// published: queue.Effects, through a small adapter, in a service;
// [MemoryLedger] in one process.
type Ledger interface {
	// Claim takes the claim on taskID's effects; an error wrapping
	// [ErrEffectsClaimed] when another holder's claim is live.
	Claim(ctx context.Context, taskID string) (Claim, error)
}

// Claim is a held claim on one task's effects, with a fencing token.
type Claim interface {
	// Check renews the claim and returns until when it holds; an error
	// wrapping [ErrFenced] when another holder has claimed since.
	Check(ctx context.Context) (time.Time, error)
	// Begin marks the effect pending under this claim and returns the
	// record that was there (State "" when none, EffectDone when it
	// happened already); [ErrFenced] when written under a newer claim.
	Begin(ctx context.Context, effect string) (EffectRecord, error)
	// Done records that the effect happened and made ref; [ErrFenced]
	// when a newer claim wrote it meanwhile.
	Done(ctx context.Context, effect, ref string) error
	// Release gives the claim up.
	Release(ctx context.Context) error
}

// EffectRecord is what the ledger holds for one effect.
type EffectRecord struct {
	State string // "", EffectPending or EffectDone
	Token uint64 // fencing token it was written under
	Ref   string // what it made: a URL, a comment id, a sha
}

// Effect states, as queue.Effects names them.
const (
	EffectPending = "pending"
	EffectDone    = "done"
)

// Ledger errors. Adapters wrap theirs so that these match.
var (
	// ErrEffectsClaimed: another holder is carrying out the task's
	// effects; try again later.
	ErrEffectsClaimed = errors.New("github: effects claimed by another holder")
	// ErrFenced: this holder's claim was superseded; it must not act.
	ErrFenced = errors.New("github: effects claim superseded")
)

// effectRun carries out one task's effects under a claim.
type effectRun struct {
	claim Claim
	// written counts effects this run carried out (not found done).
	written int
}

// step is one effect: lookup finds it already made outside the ledger
// (nil: nothing to look up), act makes it and returns what it made.
type step struct {
	name   string
	lookup func(ctx context.Context) (ref string, found bool, err error)
	act    func(ctx context.Context) (ref string, err error)
}

// do carries out s exactly once: skipped when the ledger says done;
// adopted when the outside world already has it (a holder that died after
// acting, or a ledger that lost the record); otherwise the claim is
// renewed immediately before acting and the outcome recorded with
// compare-and-set.
//
// The act is not cut off when the claim expires meanwhile: a request
// already sent may land whatever the client does, and only a holder still
// there to see its outcome can undo a duplicate (acts do so: see comment).
func (r *effectRun) do(ctx context.Context, s step) (string, error) {
	prior, err := r.claim.Begin(ctx, s.name)
	if err != nil {
		return "", fmt.Errorf("effect %s: %w", s.name, err)
	}
	if prior.State == EffectDone {
		return prior.Ref, nil
	}
	if s.lookup != nil {
		ref, found, err := s.lookup(ctx)
		if err != nil {
			return "", fmt.Errorf("effect %s: look for it: %w", s.name, err)
		}
		if found {
			return ref, r.claim.Done(ctx, s.name, ref)
		}
	}
	if _, err := r.claim.Check(ctx); err != nil {
		return "", fmt.Errorf("effect %s: %w", s.name, err)
	}
	ref, err := s.act(ctx)
	if err != nil {
		return "", err
	}
	if err := r.claim.Done(ctx, s.name, ref); err != nil {
		return "", fmt.Errorf("effect %s: %w", s.name, err)
	}
	r.written++
	return ref, nil
}

// MemoryLedger is a [Ledger] in memory: exactly-once within one process
// (its publishes serialised per task), nothing across processes. Its
// claims last ttl (a minute when zero).
type MemoryLedger struct {
	TTL time.Duration

	mu      sync.Mutex
	claims  map[string]*memClaimRec
	effects map[string]EffectRecord // by task + "\x00" + effect
}

type memClaimRec struct {
	token    uint64
	expires  time.Time
	released bool
}

// Claim takes taskID's claim.
func (l *MemoryLedger) Claim(_ context.Context, taskID string) (Claim, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.claims == nil {
		l.claims, l.effects = map[string]*memClaimRec{}, map[string]EffectRecord{}
	}
	ttl := l.TTL
	if ttl <= 0 {
		ttl = time.Minute
	}
	cur := l.claims[taskID]
	if cur != nil && !cur.released && time.Now().Before(cur.expires) {
		return nil, fmt.Errorf("%s: %w until %s", taskID, ErrEffectsClaimed, cur.expires.Format(time.RFC3339))
	}
	rec := &memClaimRec{token: 1, expires: time.Now().Add(ttl)}
	if cur != nil {
		rec.token = cur.token + 1
	}
	l.claims[taskID] = rec
	return &memClaim{l: l, task: taskID, token: rec.token, ttl: ttl}, nil
}

// Effects returns the records of taskID's effects, by name.
func (l *MemoryLedger) Effects(taskID string) map[string]EffectRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]EffectRecord{}
	for k, v := range l.effects {
		if t, name, ok := cutKey(k); ok && t == taskID {
			out[name] = v
		}
	}
	return out
}

func cutKey(k string) (string, string, bool) {
	for i := 0; i < len(k); i++ {
		if k[i] == 0 {
			return k[:i], k[i+1:], true
		}
	}
	return "", "", false
}

type memClaim struct {
	l     *MemoryLedger
	task  string
	token uint64
	ttl   time.Duration
}

func (c *memClaim) current() bool {
	cur := c.l.claims[c.task]
	return cur != nil && cur.token == c.token
}

func (c *memClaim) Check(context.Context) (time.Time, error) {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if !c.current() {
		return time.Time{}, fmt.Errorf("%s: %w (token %d)", c.task, ErrFenced, c.token)
	}
	cur := c.l.claims[c.task]
	cur.expires = time.Now().Add(c.ttl)
	return cur.expires, nil
}

func (c *memClaim) Begin(_ context.Context, effect string) (EffectRecord, error) {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	k := c.task + "\x00" + effect
	prior := c.l.effects[k]
	if prior.Token > c.token {
		return prior, fmt.Errorf("%s %s: %w", c.task, effect, ErrFenced)
	}
	if prior.State == EffectDone {
		return prior, nil
	}
	c.l.effects[k] = EffectRecord{State: EffectPending, Token: c.token}
	return prior, nil
}

func (c *memClaim) Done(_ context.Context, effect, ref string) error {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	k := c.task + "\x00" + effect
	if cur := c.l.effects[k]; cur.Token != c.token || cur.State != EffectPending {
		return fmt.Errorf("%s %s: %w (token %d)", c.task, effect, ErrFenced, c.token)
	}
	c.l.effects[k] = EffectRecord{State: EffectDone, Token: c.token, Ref: ref}
	return nil
}

func (c *memClaim) Release(context.Context) error {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.current() {
		c.l.claims[c.task].released = true
	}
	return nil
}

// commentRef is a comment id as a ledger ref.
func commentRef(id int64) string { return strconv.FormatInt(id, 10) }
