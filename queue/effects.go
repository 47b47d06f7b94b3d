package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The effects ledger: one record per (task, external effect) — a pushed
// branch, an opened pull request, a comment, a label — in the state bucket
// under effects.<task id>.<effect>, next to the claim record
// effects.<task id>._claim that whoever carries out a task's effects holds.
//
// A claim is a lease with a fencing token: taking it over from a holder
// whose claim expired (or was released) increments the token, with
// compare-and-set, so tokens only grow and no two holders ever have the
// same one. Every effect record carries the token it was written under,
// and is written with compare-and-set too: a record written under a newer
// token is never overwritten by an older holder. Before acting, a holder
// renews its claim ([EffectsClaim.Check]), which fails once another holder
// has claimed since: a worker that was paused past its claim (SIGSTOP,
// a long GC, a frozen VM) finds out before it acts, not after.
const (
	effectsKeyPrefix = "effects."
	claimEffect      = "_claim"
)

// Effect states.
const (
	// EffectPending: a holder is about to act, or acted and died before
	// recording it; whoever finds it must look at the outside world
	// before acting again.
	EffectPending = "pending"
	// EffectDone: the effect happened; Ref says what it made.
	EffectDone = "done"
)

// Errors of the effects ledger.
var (
	// ErrClaimed: another holder's claim on the task's effects is live.
	ErrClaimed = errors.New("effects claimed by another holder")
	// ErrFenced: another holder claimed the task's effects since this
	// claim was taken (this one expired), or wrote the effect under a
	// newer claim; this holder must not act.
	ErrFenced = errors.New("effects claim superseded")
)

// ClaimedError is a claim refused because another holder's is live; it
// matches [ErrClaimed].
type ClaimedError struct {
	Task, Holder string
	// Until is when the other claim expires unless renewed.
	Until time.Time
}

func (e *ClaimedError) Error() string {
	return fmt.Sprintf("%s: %v: %s until %s", e.Task, ErrClaimed, e.Holder, e.Until.Format(time.RFC3339Nano))
}

// Is matches ErrClaimed.
func (e *ClaimedError) Is(target error) bool { return target == ErrClaimed }

// RetryAfter is how long until the other claim expires, unless renewed:
// when to try again.
func (e *ClaimedError) RetryAfter() time.Duration {
	return max(time.Until(e.Until), 0) + 100*time.Millisecond
}

// Effect is one effect's record.
type Effect struct {
	// Name is the effect ("push", "pull_request", "comment.opened", …).
	Name string `json:"name"`
	// State is EffectPending or EffectDone.
	State string `json:"state"`
	// Token is the fencing token of the claim it was written under.
	Token  uint64    `json:"token"`
	Holder string    `json:"holder"`
	At     time.Time `json:"at"`
	// Ref is what the effect made: a pull request's URL, a comment's id,
	// a commit's sha.
	Ref string `json:"ref,omitempty"`
}

type claimRecord struct {
	Token    uint64    `json:"token"`
	Holder   string    `json:"holder"`
	Expires  time.Time `json:"expires"`
	Released bool      `json:"released,omitempty"`
}

// Effects is the effects-ledger role.
type Effects struct{ c *Conn }

// Effects returns the effects ledger.
func (c *Conn) Effects() *Effects { return c.effects }

func effectKey(taskID, name string) string { return effectsKeyPrefix + taskID + "." + name }

// validEffect accepts effect names that are one KV key token.
func validEffect(name string) bool {
	if name == "" || name == claimEffect || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// Claim takes the claim on taskID's effects for ttl, in the name of holder
// (a worker id; a random suffix makes each claim distinct). A live claim
// of another holder yields an error wrapping [ErrClaimed] naming it and
// its expiry; an expired or released one is taken over with the next
// fencing token.
func (e *Effects) Claim(ctx context.Context, taskID, holder string, ttl time.Duration) (*EffectsClaim, error) {
	if !validID(taskID) {
		return nil, fmt.Errorf("claim effects: invalid task id %q", taskID)
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("claim effects of %s: ttl must be positive", taskID)
	}
	holder = holder + "/" + nonce()
	kv, key := e.c.kv, effectKey(taskID, claimEffect)
	for range casRetries {
		now := time.Now().UTC()
		rec := claimRecord{Token: 1, Holder: holder, Expires: now.Add(ttl)}
		entry, err := kv.Get(ctx, key)
		var rev uint64
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			b, _ := json.Marshal(rec)
			rev, err = kv.Create(ctx, key, b)
		case err != nil:
			return nil, fmt.Errorf("read effects claim of %s: %w", taskID, err)
		default:
			var cur claimRecord
			if err := json.Unmarshal(entry.Value(), &cur); err != nil {
				return nil, fmt.Errorf("decode effects claim of %s: %w", taskID, err)
			}
			if !cur.Released && now.Before(cur.Expires) {
				return nil, &ClaimedError{Task: taskID, Holder: cur.Holder, Until: cur.Expires}
			}
			rec.Token = cur.Token + 1
			b, _ := json.Marshal(rec)
			rev, err = kv.Update(ctx, key, b, entry.Revision())
		}
		if isConflict(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("write effects claim of %s: %w", taskID, err)
		}
		return &EffectsClaim{e: e, task: taskID, rec: rec, rev: rev, ttl: ttl, pending: map[string]uint64{}}, nil
	}
	return nil, fmt.Errorf("claim effects of %s: too many concurrent claims", taskID)
}

// List returns the effect records of taskID (not the claim), by name.
func (e *Effects) List(ctx context.Context, taskID string) ([]Effect, error) {
	keys, err := e.c.kv.ListKeysFiltered(ctx, effectsKeyPrefix+taskID+".>")
	if err != nil {
		return nil, fmt.Errorf("list effects of %s: %w", taskID, err)
	}
	var out []Effect
	for k := range keys.Keys() {
		if strings.HasSuffix(k, "."+claimEffect) {
			continue
		}
		entry, err := e.c.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", k, err)
		}
		var ef Effect
		if err := json.Unmarshal(entry.Value(), &ef); err != nil {
			return nil, fmt.Errorf("decode %s: %w", k, err)
		}
		out = append(out, ef)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func nonce() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// EffectsClaim is a held claim on one task's effects. It is not safe for
// concurrent use: one holder carries out a task's effects one at a time.
type EffectsClaim struct {
	e       *Effects
	task    string
	rec     claimRecord
	rev     uint64
	ttl     time.Duration
	pending map[string]uint64 // revision of each effect this claim marked pending
}

// Token is the claim's fencing token.
func (c *EffectsClaim) Token() uint64 { return c.rec.Token }

// Holder names the claim's holder.
func (c *EffectsClaim) Holder() string { return c.rec.Holder }

// Check renews the claim for another ttl and returns until when it holds;
// call it immediately before acting. It fails with [ErrFenced] when
// another holder has claimed since (this claim expired meanwhile).
func (c *EffectsClaim) Check(ctx context.Context) (time.Time, error) {
	rec := c.rec
	rec.Expires = time.Now().UTC().Add(c.ttl)
	b, _ := json.Marshal(rec)
	rev, err := c.e.c.kv.Update(ctx, effectKey(c.task, claimEffect), b, c.rev)
	if isConflict(err) {
		return time.Time{}, fmt.Errorf("%s: %w (token %d)", c.task, ErrFenced, c.rec.Token)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("renew effects claim of %s: %w", c.task, err)
	}
	c.rec, c.rev = rec, rev
	return rec.Expires, nil
}

// Begin marks effect name pending under this claim and returns the record
// that was there before (zero State when none). When that record is done,
// nothing is written and the caller must not act: the effect happened. A
// pending prior record (a holder that died or was paused around acting)
// tells the caller to look at the outside world first. A record written
// under a newer claim fails with [ErrFenced].
func (c *EffectsClaim) Begin(ctx context.Context, name string) (Effect, error) {
	if !validEffect(name) {
		return Effect{}, fmt.Errorf("effect %q: not a valid name", name)
	}
	kv, key := c.e.c.kv, effectKey(c.task, name)
	for range casRetries {
		var prior Effect
		entry, err := kv.Get(ctx, key)
		exists := err == nil
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return Effect{}, fmt.Errorf("read effect %s of %s: %w", name, c.task, err)
		default:
			if err := json.Unmarshal(entry.Value(), &prior); err != nil {
				return Effect{}, fmt.Errorf("decode effect %s of %s: %w", name, c.task, err)
			}
			if prior.Token > c.rec.Token {
				return prior, fmt.Errorf("%s %s: %w (written under token %d, this claim has %d)", c.task, name, ErrFenced, prior.Token, c.rec.Token)
			}
			if prior.State == EffectDone {
				return prior, nil
			}
		}
		b, _ := json.Marshal(Effect{Name: name, State: EffectPending, Token: c.rec.Token, Holder: c.rec.Holder, At: time.Now().UTC()})
		var rev uint64
		if !exists {
			rev, err = kv.Create(ctx, key, b)
		} else {
			rev, err = kv.Update(ctx, key, b, entry.Revision())
		}
		if isConflict(err) {
			continue
		}
		if err != nil {
			return Effect{}, fmt.Errorf("write effect %s of %s: %w", name, c.task, err)
		}
		c.pending[name] = rev
		return prior, nil
	}
	return Effect{}, fmt.Errorf("effect %s of %s: too many concurrent writes", name, c.task)
}

// Done records that effect name happened and made ref. It must follow
// Begin under the same claim; it fails with [ErrFenced] when a newer
// claim wrote the record meanwhile (this holder acted late: undo what it
// made if it can).
func (c *EffectsClaim) Done(ctx context.Context, name, ref string) error {
	rev, ok := c.pending[name]
	if !ok {
		return fmt.Errorf("effect %s of %s: Done without Begin", name, c.task)
	}
	b, _ := json.Marshal(Effect{Name: name, State: EffectDone, Token: c.rec.Token, Holder: c.rec.Holder, At: time.Now().UTC(), Ref: ref})
	_, err := c.e.c.kv.Update(ctx, effectKey(c.task, name), b, rev)
	if isConflict(err) {
		return fmt.Errorf("%s %s: %w (token %d)", c.task, name, ErrFenced, c.rec.Token)
	}
	if err != nil {
		return fmt.Errorf("record effect %s of %s: %w", name, c.task, err)
	}
	delete(c.pending, name)
	return nil
}

// Release gives the claim up so that the next holder need not wait for it
// to expire. A claim already superseded is left alone.
func (c *EffectsClaim) Release(ctx context.Context) error {
	rec := c.rec
	rec.Released = true
	b, _ := json.Marshal(rec)
	_, err := c.e.c.kv.Update(ctx, effectKey(c.task, claimEffect), b, c.rev)
	if err != nil && !isConflict(err) {
		return fmt.Errorf("release effects claim of %s: %w", c.task, err)
	}
	return nil
}
