package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/wrenchworks/wrench/task"
)

const (
	stateKeyPrefix  = "task."
	cancelKeyPrefix = "cancel."
	// casRetries bounds compare-and-set loops; a task's key is written by at
	// most a submitter, a canceller and one or two workers, so conflicts are
	// few.
	casRetries = 20
)

func stateKey(id string) string  { return stateKeyPrefix + id }
func cancelKey(id string) string { return cancelKeyPrefix + id }

// entry is a decoded state record with its KV revision.
type entry struct {
	st  task.Status
	rev uint64
}

func (c *Conn) get(ctx context.Context, id string) (entry, error) {
	e, err := c.kv.Get(ctx, stateKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return entry{}, fmt.Errorf("%w: %s", task.ErrNotFound, id)
	}
	if err != nil {
		return entry{}, fmt.Errorf("read state of %s: %w", id, err)
	}
	var st task.Status
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		return entry{}, fmt.Errorf("decode state of %s: %w", id, err)
	}
	return entry{st: st, rev: e.Revision()}, nil
}

// encodeStatus marshals st. A record that would not fit in a NATS message
// loses, in turn, its inline patch (the artifact store keeps it) and the
// test output tails.
func (c *Conn) encodeStatus(st task.Status) ([]byte, error) {
	limit := int(c.nc.MaxPayload()) - 4096
	shrink := []func(r *task.Result){
		func(r *task.Result) { r.Patch = "" },
		func(r *task.Result) {
			for _, tr := range []**task.TestRun{&r.TestsBefore, &r.TestsAfter} {
				if *tr != nil {
					cp := **tr
					cp.Output = ""
					*tr = &cp
				}
			}
		},
	}
	for i := 0; ; i++ {
		b, err := json.Marshal(st)
		if err != nil {
			return nil, fmt.Errorf("encode state of %s: %w", st.TaskID, err)
		}
		if len(b) <= limit {
			return b, nil
		}
		if st.Result == nil || i == len(shrink) {
			return nil, fmt.Errorf("encode state of %s: %d bytes exceed the %d-byte limit", st.TaskID, len(b), limit)
		}
		r := *st.Result
		shrink[i](&r)
		st.Result = &r
	}
}

// create writes st as a new key; ErrKeyExists when it is there already.
func (c *Conn) create(ctx context.Context, st task.Status) (uint64, error) {
	b, err := c.encodeStatus(st)
	if err != nil {
		return 0, err
	}
	return c.kv.Create(ctx, stateKey(st.TaskID), b)
}

func (c *Conn) update(ctx context.Context, st task.Status, rev uint64) (uint64, error) {
	b, err := c.encodeStatus(st)
	if err != nil {
		return 0, err
	}
	return c.kv.Update(ctx, stateKey(st.TaskID), b, rev)
}

func isConflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)
}

// transition applies fn to the current state of id (or to init when the key
// is absent and init is not nil) and writes it with compare-and-set,
// retrying on conflicts. fn returns false to leave the state as it is.
func (c *Conn) transition(ctx context.Context, id string, init *task.Status, fn func(*task.Status) bool) (task.Status, uint64, bool, error) {
	for range casRetries {
		e, err := c.get(ctx, id)
		if errors.Is(err, task.ErrNotFound) && init != nil {
			st := *init
			if !fn(&st) {
				return st, 0, false, nil
			}
			rev, err := c.create(ctx, st)
			if isConflict(err) {
				continue
			}
			if err != nil {
				return task.Status{}, 0, false, fmt.Errorf("write state of %s: %w", id, err)
			}
			return st, rev, true, nil
		}
		if err != nil {
			return task.Status{}, 0, false, err
		}
		st := e.st
		if !fn(&st) {
			return e.st, e.rev, false, nil
		}
		rev, err := c.update(ctx, st, e.rev)
		if isConflict(err) {
			continue
		}
		if err != nil {
			return task.Status{}, 0, false, fmt.Errorf("write state of %s: %w", id, err)
		}
		return st, rev, true, nil
	}
	return task.Status{}, 0, false, fmt.Errorf("write state of %s: too many concurrent updates", id)
}

// States is the state-machine role of a [Conn]: every task's state record,
// claimed for a run through a [Lease] and settled with compare-and-set.
type States struct{ c *Conn }

// Status returns the current status of task id, or an error wrapping
// [task.ErrNotFound]. A task in the work queue without a state record is
// reported queued.
func (r *States) Status(ctx context.Context, id string) (task.Status, error) {
	if !validID(id) {
		return task.Status{}, fmt.Errorf("%w: %q", task.ErrNotFound, id)
	}
	e, err := r.c.get(ctx, id)
	if errors.Is(err, task.ErrNotFound) {
		// Queued, but its record was not written (or has aged out).
		return r.c.fromQueue(ctx, id)
	}
	if err != nil {
		return task.Status{}, err
	}
	return e.st, nil
}

// Lease is a worker's claim on one delivery of a task: the state record says
// it runs the task (worker id and attempt), and every later write checks that
// this is still so. A Lease is safe for concurrent use.
type Lease struct {
	c       *Conn
	id      string
	worker  string
	attempt int

	mu       sync.Mutex
	rev      uint64
	st       task.Status
	prev     task.Status // the record as the claim found it
	released bool        // handed back with Requeue
}

// Previous returns the task's record as it was before this lease claimed
// it: how the earlier attempt ended (queued with a reason, or still
// running when its holder stopped responding).
func (l *Lease) Previous() task.Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.prev
}

// Claim says which delivery asks to run a task.
type Claim struct {
	// Attempt is the delivery count (1 for the first).
	Attempt int
	// Worker is the claiming worker's id.
	Worker string
	// Message is the delivered message's stream sequence (0: unknown, and
	// then a running record is always taken over).
	Message uint64
	// Live is how recently a holder must have written its record to count
	// as alive (the heartbeat touches it every AckWait/3; pass AckWait).
	Live time.Duration
}

// Acquire marks t as running by the claim's worker and attempt and returns
// the lease. A task already final yields its status and an error wrapping
// [ErrFinal]: the delivery is a duplicate to ack without running. A task
// without a state record (published by something other than
// [Submissions.Submit]) gets one. A running record is taken over when it
// came from the same message (JetStream redelivered it because its holder
// stopped heartbeating) or its holder has not written it for cl.Live; a
// record another message's live holder keeps yields [ErrDuplicate], and so
// does a paused record's own message delivered again.
func (r *States) Acquire(ctx context.Context, t task.Task, cl Claim) (*Lease, task.Status, error) {
	c := r.c
	now := time.Now().UTC()
	stored := t.Redacted() // the record never keeps the URL's credentials
	init := &task.Status{TaskID: t.ID, State: task.StateQueued, Task: &stored, CreatedAt: createdAt(t, now)}
	var final, dup, stale bool
	var prev task.Status
	st, rev, _, err := c.transition(ctx, t.ID, init, func(s *task.Status) bool {
		final, dup = s.State.Final(), heldElsewhere(s, cl, now)
		// The paused attempt's own message back (its ack was lost): the
		// task runs again only from the message a resume publishes.
		stale = s.State == task.StatePaused && cl.Message != 0 && s.Message == cl.Message
		if final || dup || stale {
			return false
		}
		prev = *s
		if (s.State == task.StateRunning || s.State == task.StateVerifying) && s.Progress != nil {
			// A takeover: the holder stopped without handing the task
			// back; what it spent (its last live figures) counts.
			s.Spent = addSpent(s.Spent, progressUsage(*s.Progress))
		}
		s.State = task.StateRunning
		s.Attempt = cl.Attempt
		s.Worker = cl.Worker
		s.Message = cl.Message
		s.Reason = ""
		s.Progress = nil
		s.Pause = nil
		s.UpdatedAt = now
		if s.Task == nil {
			s.Task = &stored
		}
		return true
	})
	if err != nil {
		return nil, task.Status{}, err
	}
	if final {
		return nil, st, fmt.Errorf("%s: %w (%s)", t.ID, ErrFinal, st.State)
	}
	if dup {
		return nil, st, fmt.Errorf("%s: %w (message %d, held by %s from message %d)", t.ID, ErrDuplicate, cl.Message, st.Worker, st.Message)
	}
	if stale {
		return nil, st, fmt.Errorf("%s: %w (message %d paused the task; it runs again when resumed)", t.ID, ErrDuplicate, cl.Message)
	}
	return &Lease{c: c, id: t.ID, worker: cl.Worker, attempt: cl.Attempt, rev: rev, st: st, prev: prev}, st, nil
}

// progressUsage is the model use a live Progress reports.
func progressUsage(p task.Progress) task.Usage {
	u := task.Usage{InputTokens: p.InputTokens, OutputTokens: p.OutputTokens, CostUSD: p.CostUSD, ModelCalls: p.ModelCalls}
	if u.InputTokens+u.OutputTokens == 0 {
		u.InputTokens = p.Tokens // written before the split was recorded
	}
	return u
}

// spentOf is the model use a record accounts for: its earlier attempts
// and, while it is running, the running attempt's live figures.
func spentOf(s task.Status) task.Usage {
	spent := s.Spent
	if (s.State == task.StateRunning || s.State == task.StateVerifying) && s.Progress != nil {
		spent = addSpent(spent, progressUsage(*s.Progress))
	}
	if spent == nil {
		return task.Usage{}
	}
	return *spent
}

// addSpent returns spent plus u, turns aside (a conversation's turns are
// not summed over attempts).
func addSpent(spent *task.Usage, u task.Usage) *task.Usage {
	var out task.Usage
	if spent != nil {
		out = *spent
	}
	u.Turns = 0
	out = out.Add(u)
	return &out
}

// heldElsewhere reports whether s is running from another message than
// cl's, written by its holder within cl.Live of now.
func heldElsewhere(s *task.Status, cl Claim, now time.Time) bool {
	if s.State != task.StateRunning && s.State != task.StateVerifying {
		return false
	}
	if cl.Message == 0 || s.Message == 0 || s.Message == cl.Message || cl.Live <= 0 {
		return false
	}
	return now.Sub(s.UpdatedAt) < cl.Live
}

// Status returns the state as last written through the lease.
func (l *Lease) Status() task.Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st
}

// write applies fn as the lease holder. A conflict re-reads the record: when
// it still names this worker and attempt and is not final, the write is
// retried; when it is final by this lease (an earlier write whose reply was
// lost), ok reports that; otherwise the lease is lost.
func (l *Lease) write(ctx context.Context, final bool, fn func(*task.Status)) (task.Status, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writeLocked(ctx, final, fn)
}

// writeLocked is write with l.mu held.
func (l *Lease) writeLocked(ctx context.Context, final bool, fn func(*task.Status)) (task.Status, error) {
	if l.released {
		return l.st, fmt.Errorf("%s: %w (handed back)", l.id, ErrLostLease)
	}
	if !final && l.st.State.Final() {
		return l.st, nil
	}
	for range casRetries {
		st := l.st
		fn(&st)
		st.UpdatedAt = time.Now().UTC()
		rev, err := l.c.update(ctx, st, l.rev)
		if err == nil {
			l.st, l.rev = st, rev
			return st, nil
		}
		if !isConflict(err) {
			return task.Status{}, fmt.Errorf("write state of %s: %w", l.id, err)
		}
		e, err := l.c.get(ctx, l.id)
		if err != nil {
			return task.Status{}, err
		}
		if e.st.Worker != l.worker || e.st.Attempt != l.attempt {
			return e.st, fmt.Errorf("%s: %w (now %s attempt %d)", l.id, ErrLostLease, e.st.Worker, e.st.Attempt)
		}
		if e.st.State.Final() {
			if mine := st.Result; mine != nil && e.st.Result != nil &&
				e.st.Result.Worker == mine.Worker && e.st.Result.Attempt == mine.Attempt &&
				e.st.Result.FinishedAt.Equal(mine.FinishedAt) {
				l.st, l.rev = e.st, e.rev
				return e.st, nil
			}
			return e.st, fmt.Errorf("%s: %w (final: %s)", l.id, ErrLostLease, e.st.State)
		}
		if e.st.State == task.StateQueued || e.st.State == task.StatePaused {
			return e.st, fmt.Errorf("%s: %w (handed back: %s)", l.id, ErrLostLease, e.st.State)
		}
		l.st, l.rev = e.st, e.rev
	}
	return task.Status{}, fmt.Errorf("write state of %s: too many concurrent updates", l.id)
}

// Update changes the running state as the lease holder (state verifying,
// progress). It returns an error wrapping [ErrLostLease] when the task was
// taken over or handed back, and does nothing once the lease wrote a final
// result.
func (l *Lease) Update(ctx context.Context, fn func(*task.Status)) error {
	_, err := l.write(ctx, false, func(s *task.Status) {
		fn(s)
		s.Worker, s.Attempt = l.worker, l.attempt
		if s.State != task.StateRunning && s.State != task.StateVerifying {
			s.State = task.StateRunning
		}
	})
	return err
}

// Touch rewrites the record unchanged but for UpdatedAt: a liveness mark and
// an ownership check.
func (l *Lease) Touch(ctx context.Context) error {
	return l.Update(ctx, func(*task.Status) {})
}

// Finish writes res as the task's final result. Exactly one Finish (or
// other final write) wins per task; a loser gets [ErrLostLease]. Finish may be
// retried after a transport error: if the earlier write landed, the retry
// succeeds with the same status.
func (l *Lease) Finish(ctx context.Context, res task.Result) (task.Status, error) {
	if !res.Status.Final() {
		return task.Status{}, fmt.Errorf("finish %s: %q is not a final state", l.id, res.Status)
	}
	res.TaskID, res.Worker, res.Attempt = l.id, l.worker, l.attempt
	if res.FinishedAt.IsZero() {
		res.FinishedAt = time.Now().UTC()
	}
	return l.write(ctx, true, func(s *task.Status) {
		res.Tenant = tenantOf(s)
		s.State = res.Status
		s.Reason = res.Reason
		s.Result = &res
		s.Progress = nil
	})
}

// Requeue hands the task back: state queued with reason, ready for the next
// delivery. spent, when not nil, is the model use of the task's attempts so
// far, this one's included (Status.Spent).
func (l *Lease) Requeue(ctx context.Context, reason string, spent *task.Usage) error {
	return l.handOff(ctx, spent, func(s *task.Status) {
		s.State = task.StateQueued
		s.Reason = reason
	})
}

// handOff writes the lease's last change to the task's record, with the
// model use spent so far carried over (its turns start again) and no
// progress, and then releases the lease.
func (l *Lease) handOff(ctx context.Context, spent *task.Usage, change func(*task.Status)) error {
	// The write and the release are one critical section: a progress
	// write (Update) let in between would find the record handed back but
	// the lease not released, and set it running again.
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.writeLocked(ctx, false, func(s *task.Status) {
		change(s)
		s.Progress = nil
		if spent != nil {
			u := *spent
			u.Turns = 0
			s.Spent = &u
		}
	})
	if err == nil {
		l.released = true
	}
	return err
}

// Settle writes res as the final result of id whatever its non-final state
// (queued, or running by a worker that is gone), creating the record from t
// when there is none. It is how rejections, dead letters and cancellations of
// queued tasks end a task. written is false when the task was already final;
// st is then the existing status.
func (r *States) Settle(ctx context.Context, id string, t *task.Task, res task.Result) (st task.Status, written bool, err error) {
	c := r.c
	if !res.Status.Final() {
		return task.Status{}, false, fmt.Errorf("settle %s: %q is not a final state", id, res.Status)
	}
	now := time.Now().UTC()
	res.TaskID = id
	if res.FinishedAt.IsZero() {
		res.FinishedAt = now
	}
	init := &task.Status{TaskID: id, Task: t, CreatedAt: now}
	if t != nil {
		init.CreatedAt = createdAt(*t, now)
	}
	st, _, written, err = c.transition(ctx, id, init, func(s *task.Status) bool {
		if s.State.Final() {
			return false
		}
		res.Tenant = tenantOf(s)
		s.State = res.Status
		s.Reason = res.Reason
		s.Result = &res
		s.Progress = nil
		s.UpdatedAt = now
		if res.Attempt == 0 {
			res.Attempt = s.Attempt
		}
		return true
	})
	return st, written, err
}

// SetPullRequest records on a final task's result the pull request it
// became (what happened after the result was stored), with
// compare-and-set; the same URL again writes nothing. A task that is not
// final is left alone (ErrNotFound when there is no record).
func (r *States) SetPullRequest(ctx context.Context, id, url string) error {
	_, _, _, err := r.c.transition(ctx, id, nil, func(s *task.Status) bool {
		if !s.State.Final() || s.Result == nil || s.Result.PullRequestURL == url {
			return false
		}
		res := *s.Result
		res.PullRequestURL = url
		s.Result = &res
		return true
	})
	return err
}

// CancelRequested reports whether a cancellation of id was requested.
func (r *States) CancelRequested(ctx context.Context, id string) (bool, error) {
	_, err := r.c.kv.Get(ctx, cancelKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read cancel request of %s: %w", id, err)
	}
	return true, nil
}

// WatchCancels delivers the id of every cancellation requested from now on,
// until ctx is done; the channel is then closed. Dispatchers route these to
// their running tasks. It listens on the subject the state bucket stores
// cancel requests under, so it costs no consumer; a request published while
// the connection is down is missed here, and found by the dispatcher's
// periodic look at the request key.
func (r *States) WatchCancels(ctx context.Context) (<-chan string, error) {
	in := make(chan *nats.Msg, 64)
	sub, err := r.c.nc.ChanSubscribe("$KV."+StateBucket+"."+cancelKeyPrefix+"*", in)
	if err != nil {
		return nil, fmt.Errorf("watch cancel requests: %w", err)
	}
	prefix := "$KV." + StateBucket + "." + cancelKeyPrefix
	out := make(chan string)
	go func() {
		defer close(out)
		defer func() { _ = sub.Unsubscribe() }()
		for {
			select {
			case <-ctx.Done():
				return
			case m := <-in:
				if op := m.Header.Get("KV-Operation"); op != "" {
					continue // a delete or purge of the request
				}
				select {
				case out <- strings.TrimPrefix(m.Subject, prefix):
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

func createdAt(t task.Task, now time.Time) time.Time {
	if t.CreatedAt.IsZero() {
		return now
	}
	return t.CreatedAt
}

// tenantOf is the tenant of the task a record holds (the default one when
// the record holds no task or the task names none).
func tenantOf(s *task.Status) string {
	if s.Task == nil {
		return task.DefaultTenant
	}
	return s.Task.TenantName()
}
