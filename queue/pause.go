package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/task"
)

// pausedKeyPrefix + id keeps a paused task's message body in the state
// bucket while it has no message in the work queue: the record's task has
// its URL's credentials removed, the message keeps them (as the queue
// did). Never served by the API.
const pausedKeyPrefix = "paused."

func pausedKey(id string) string { return pausedKeyPrefix + id }

// Pause hands the task back as paused (state paused with p's reason, p as
// its Pause) rather than queued: it is not to run again until
// [Submissions.Resume]. spent, when not nil, is the model use of its
// attempts so far, this one's included (Status.Spent); message is the
// task's message body, kept for the resumption. The caller then acks the
// delivery. Like Requeue, it releases the lease.
func (l *Lease) Pause(ctx context.Context, p task.Pause, spent *task.Usage, message []byte) error {
	if len(message) > 0 {
		if _, err := l.c.kv.Put(ctx, pausedKey(l.id), message); err != nil {
			return fmt.Errorf("keep the message of paused %s: %w", l.id, err)
		}
	}
	return l.handOff(ctx, spent, func(s *task.Status) {
		s.State = task.StatePaused
		s.Reason = p.Reason
		s.Pause = &p
	})
}

// Resume continues paused task id by hand (wrench resume): [Submissions.ResumeFor]
// with why "resumed by hand".
func (s *Submissions) Resume(ctx context.Context, id string) (task.Status, error) {
	return s.ResumeFor(ctx, id, ResumedByHand)
}

// ResumedByHand is why a task resumed with [Submissions.Resume] did.
const ResumedByHand = "resumed by hand"

// ResumeFor continues paused task id, saying why ("the budget allows it
// again", ResumedByHand): it goes on the work queue again as a new
// message carrying its deliveries so far (the paused ones counted free),
// so the worker that takes it continues from its save point, and its
// record says queued with reason "a budget pause (why)". The message goes
// first: a record never says queued without one. A task that is not
// paused is left alone: its status and an error wrapping
// [task.ErrNotPaused]; an unknown id gives one wrapping [task.ErrNotFound].
// Resumes that race queue the task once.
func (s *Submissions) ResumeFor(ctx context.Context, id, why string) (task.Status, error) {
	c := s.c
	if !validID(id) {
		return task.Status{}, fmt.Errorf("%w: %q", task.ErrNotFound, id)
	}
	published := false
	for range casRetries {
		e, err := c.get(ctx, id)
		if err != nil {
			return task.Status{}, err
		}
		if published && (e.st.State == task.StateRunning || e.st.State == task.StateVerifying) {
			return e.st, nil // a worker took the message this call published before the record said queued
		}
		if e.st.State != task.StatePaused || e.st.Task == nil {
			return e.st, fmt.Errorf("resume %s: %w (it is %s)", id, task.ErrNotPaused, e.st.State)
		}
		reason := fmt.Sprintf("a budget pause (%s)", why)
		if err := c.publishPaused(ctx, e, reason); err != nil {
			return e.st, err
		}
		published = true
		st := e.st
		st.State = task.StateQueued
		st.Reason = reason
		st.Pause = nil
		st.UpdatedAt = time.Now().UTC()
		if _, err := c.update(ctx, st, e.rev); isConflict(err) {
			continue // the message is deduplicated by its id, or finds the task final
		} else if err != nil {
			return e.st, fmt.Errorf("resume %s: %w", id, err)
		}
		if err := c.kv.Delete(ctx, pausedKey(id)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			c.log.WarnContext(ctx, "forget a resumed task's kept message", "task_id", id, "err", err)
		}
		c.emit(ctx, task.Event{TaskID: id, Time: st.UpdatedAt, Kind: task.EventState, State: task.StateQueued, Text: st.Reason})
		return st, nil
	}
	return task.Status{}, fmt.Errorf("resume %s: too many concurrent updates", id)
}

// publishPaused queues a paused task's message again (the kept body, or
// the record's task without credentials when none was kept), carrying its
// delivery counts. Its id is the record's revision, so two resumes of one
// pause publish it once.
func (c *Conn) publishPaused(ctx context.Context, e entry, reason string) error {
	id := e.st.TaskID
	data, err := c.kv.Get(ctx, pausedKey(id))
	var body []byte
	switch {
	case err == nil:
		body = data.Value()
	case errors.Is(err, jetstream.ErrKeyNotFound):
		if body, err = json.Marshal(e.st.Task); err != nil {
			return fmt.Errorf("resume %s: encode task: %w", id, err)
		}
	default:
		return &task.SubmitError{TaskID: id, Kind: task.ErrNotQueued, Err: err}
	}
	free := 0
	if p := e.st.Pause; p != nil {
		free = p.Free
	}
	tenant := tenantOf(&e.st) // on its tenant's subjects, for its share of the queue
	if err := c.ensureTenantConsumer(ctx, tenant); err != nil {
		return &task.SubmitError{TaskID: id, Kind: task.ErrNotQueued, Err: err}
	}
	msg := &nats.Msg{Subject: TaskSubject(tenant, id), Data: body, Header: nats.Header{}}
	msg.Header.Set(HeaderEarlierDeliveries, strconv.Itoa(e.st.Attempt))
	msg.Header.Set(HeaderFreeDeliveries, strconv.Itoa(min(free, e.st.Attempt)))
	msg.Header.Set(HeaderResumeReason, reason)
	if p := c.cfg.Propagator; p != nil {
		p.Inject(ctx, headerCarrier(msg.Header))
	}
	_, err = c.js.PublishMsg(ctx, msg, jetstream.WithMsgID(fmt.Sprintf("%s-p%d", id, e.rev)), jetstream.WithExpectStream(TasksStream))
	if err != nil {
		return c.submitFailure(id, fmt.Errorf("publish task %s: %w", id, err))
	}
	return nil
}

// Paused returns the records of the tasks that are paused.
func (r *States) Paused(ctx context.Context) ([]task.Status, error) {
	var out []task.Status
	err := r.c.scan(ctx, func(e entry) {
		if e.st.State == task.StatePaused {
			out = append(out, e.st)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("list paused tasks: %w", err)
	}
	return out, nil
}

// forgetPaused drops a paused task's kept message (it was cancelled).
func (c *Conn) forgetPaused(ctx context.Context, id string) {
	if err := c.kv.Delete(ctx, pausedKey(id)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		c.log.DebugContext(ctx, "forget a cancelled task's kept message", "task_id", id, "err", err)
	}
}

// Budget sweeps' reasons for resuming a task (what its "a budget pause
// (…)" line says).
const (
	ResumedNewDay = "the day rolled over"
	ResumedRoom   = "its budget allows it again"
)

// ResumeWithinBudget resumes the tasks a budget paused whose accounts now
// allow their next call: each account accounts(task) names (the policy's,
// as it is now) has at least the pause's NeedUSD left on now's budget day
// (a raised cap, a new day; an account no longer named no longer counts).
// The oldest pauses go first, and each one resumed takes its NeedUSD from
// what is left, so a small raise does not wake every paused task at once.
// It returns how many it resumed and how many stay paused. `wrench serve`
// runs it every minute.
func (s *Submissions) ResumeWithinBudget(ctx context.Context, accounts func(task.Task) []task.BudgetAccount, now time.Time) (resumed, waiting int, err error) {
	paused, err := s.c.states.Paused(ctx)
	if err != nil {
		return 0, 0, err
	}
	sort.Slice(paused, func(i, j int) bool { return pausedAt(paused[i]).Before(pausedAt(paused[j])) })
	day := task.BudgetDay(now)
	left := map[task.BudgetAccount]float64{}
	for _, st := range paused {
		if st.Pause == nil || st.Pause.Reason != task.ReasonBudget || st.Task == nil {
			waiting++
			continue
		}
		need := st.Pause.NeedUSD
		fits := true
		accs := accounts(*st.Task)
		for _, a := range accs {
			l, ok := left[a]
			if !ok {
				bal, err := s.c.budgets.Balance(ctx, day, a)
				if err != nil {
					return resumed, waiting, err
				}
				l = a.DailyUSD - bal.SpentUSD - bal.HeldUSD
				left[a] = l
			}
			fits = fits && l >= need && l > 0
		}
		if !fits {
			waiting++
			continue
		}
		why := ResumedRoom
		if st.Pause.Day != day {
			why = ResumedNewDay
		}
		if _, err := s.ResumeFor(ctx, st.TaskID, why); err != nil {
			if errors.Is(err, task.ErrNotPaused) {
				continue // resumed or cancelled meanwhile
			}
			return resumed, waiting, err
		}
		for _, a := range accs {
			left[a] -= need
		}
		resumed++
	}
	return resumed, waiting, nil
}

func pausedAt(st task.Status) time.Time {
	if st.Pause != nil {
		return st.Pause.At
	}
	return st.UpdatedAt
}
