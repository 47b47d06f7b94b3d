package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/task"
)

// Submissions is the submitting role of a [Conn]: tasks come in and are
// cancelled through it.
type Submissions struct{ c *Conn }

// Submit validates t, fills its ID (when empty) and CreatedAt, publishes
// it on the work queue with Nats-Msg-Id = ID and records it as queued.
//
// An invalid task returns a *[task.ValidationError]. A task whose ID is
// already known is not queued again: Submit returns the existing status with
// duplicate = true (and queues it after all when its record says queued but
// its message is missing: an earlier submission that was not confirmed).
//
// The message goes first, so a task is never recorded without being
// queued: a failure returns a *[task.SubmitError] that says whether nothing
// was stored ([task.ErrNotQueued]) or the store did not confirm the publish
// ([task.ErrUnconfirmed]: the task may be queued; submitting the same id
// again queues it at most once). A task queued whose record could not be
// written is still a success: [States.Status] finds it in the queue, and
// the worker that takes it writes the record.
//
// With a Propagator configured, the trace context of ctx travels in the
// message headers to the worker.
func (s *Submissions) Submit(ctx context.Context, t task.Task) (st task.Status, duplicate bool, err error) {
	c := s.c
	if err := t.Validate(); err != nil {
		return task.Status{}, false, err
	}
	if t.ID == "" {
		t.ID = task.NewID()
	}
	notQueued := func(err error) error { return &task.SubmitError{TaskID: t.ID, Kind: task.ErrNotQueued, Err: err} }
	if err := c.Ready(); err != nil {
		return task.Status{}, false, notQueued(err)
	}
	now := time.Now().UTC()
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now
	}
	e, err := c.get(ctx, t.ID)
	if err == nil {
		if _, err := c.requeueIfLost(ctx, e); err != nil {
			return task.Status{}, false, err
		}
		return e.st, true, nil
	}
	if !errors.Is(err, task.ErrNotFound) {
		return task.Status{}, false, notQueued(err)
	}
	// No record: a submission whose record was lost may still be queued.
	if qst, err := c.fromQueueAt(ctx, t.ID, TaskSubject(t.TenantName(), t.ID)); err == nil {
		if _, err := c.create(ctx, qst); err != nil && !isConflict(err) {
			c.log.WarnContext(ctx, "record queued task", "task_id", t.ID, "err", err)
		}
		return qst, true, nil
	} else if !errors.Is(err, task.ErrNotFound) {
		return task.Status{}, false, notQueued(err)
	}
	ack, err := c.publishTask(ctx, t, t.ID)
	if err != nil {
		return task.Status{}, false, c.submitFailure(t.ID, err)
	}
	stored := t.Redacted() // the message keeps the URL's credentials, the record does not
	st = task.Status{TaskID: t.ID, State: task.StateQueued, Task: &stored, CreatedAt: t.CreatedAt, UpdatedAt: now}
	if _, err := c.create(ctx, st); err != nil && !isConflict(err) {
		c.log.WarnContext(ctx, "task queued without its state record; the worker that takes it writes one", "task_id", t.ID, "err", err)
	}
	if ack.Duplicate {
		// A concurrent submission of the same id got there first.
		if e, err := c.get(ctx, t.ID); err == nil {
			return e.st, true, nil
		}
		return st, true, nil
	}
	c.emit(ctx, task.Event{TaskID: t.ID, Kind: task.EventState, State: task.StateQueued})
	return st, false, nil
}

// submitFailure classifies a failed publish: refused by the server (not
// queued), or unanswered (unconfirmed: it may have been stored).
func (c *Conn) submitFailure(id string, err error) error {
	kind := task.ErrUnconfirmed
	var apiErr *jetstream.APIError
	var np *notPublished
	if errors.As(err, &apiErr) || errors.As(err, &np) || errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrConnectionClosed) {
		kind = task.ErrNotQueued
	}
	return &task.SubmitError{TaskID: id, Kind: kind, Err: err}
}

// publishTask puts t on the work queue with message id msgID.
func (c *Conn) publishTask(ctx context.Context, t task.Task, msgID string) (*jetstream.PubAck, error) {
	data, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("encode task %s: %w", t.ID, err)
	}
	if err := c.ensureTenantConsumer(ctx, t.TenantName()); err != nil {
		return nil, &notPublished{err: err}
	}
	msg := &nats.Msg{Subject: TaskSubject(t.TenantName(), t.ID), Data: data, Header: nats.Header{}}
	if p := c.cfg.Propagator; p != nil {
		p.Inject(ctx, headerCarrier(msg.Header))
	}
	ack, err := c.js.PublishMsg(ctx, msg, jetstream.WithMsgID(msgID), jetstream.WithExpectStream(TasksStream))
	if err != nil {
		return nil, fmt.Errorf("publish task %s: %w", t.ID, err)
	}
	return ack, nil
}

// fromQueue is the status of a task that is in the work queue without a
// state record, or an error wrapping [task.ErrNotFound].
func (c *Conn) fromQueue(ctx context.Context, id string) (task.Status, error) {
	return c.fromQueueAt(ctx, id, "")
}

// fromQueueAt is fromQueue looking only at subject (every task subject
// when "").
func (c *Conn) fromQueueAt(ctx context.Context, id, subject string) (task.Status, error) {
	var m *jetstream.RawStreamMsg
	var err error
	if subject == "" {
		m, err = c.lastTaskMsg(ctx, id)
	} else {
		m, err = c.tasks.GetLastMsgForSubject(ctx, subject)
	}
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return task.Status{}, fmt.Errorf("%w: %s", task.ErrNotFound, id)
	}
	if err != nil {
		return task.Status{}, fmt.Errorf("look for %s in the queue: %w", id, err)
	}
	t, err := task.Decode(m.Data)
	if err != nil {
		return task.Status{}, fmt.Errorf("%w: %s (undecodable message)", task.ErrNotFound, id)
	}
	if t.ID == "" {
		t.ID = id
	}
	t = t.Redacted()
	return task.Status{TaskID: id, State: task.StateQueued, Task: &t, CreatedAt: createdAt(t, m.Time), UpdatedAt: m.Time}, nil
}

// requeueIfLost queues a task again whose record says queued but whose
// message is not in the work queue (its submission was not confirmed, or
// the message was lost). The record is touched first with compare-and-set,
// so that of two callers only one publishes, and none after a worker took
// the task.
func (c *Conn) requeueIfLost(ctx context.Context, e entry) (bool, error) {
	if e.st.State != task.StateQueued || e.st.Task == nil {
		return false, nil
	}
	_, err := c.fromQueue(ctx, e.st.TaskID)
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, task.ErrNotFound) {
		return false, &task.SubmitError{TaskID: e.st.TaskID, Kind: task.ErrNotQueued, Err: err}
	}
	st := e.st
	st.UpdatedAt = time.Now().UTC()
	rev, err := c.update(ctx, st, e.rev)
	if isConflict(err) {
		return false, nil // changed meanwhile: someone else acts on it
	}
	if err != nil {
		return false, &task.SubmitError{TaskID: st.TaskID, Kind: task.ErrNotQueued, Err: err}
	}
	if _, err := c.publishTask(ctx, *st.Task, fmt.Sprintf("%s-q%d", st.TaskID, rev)); err != nil {
		return false, c.submitFailure(st.TaskID, err)
	}
	c.log.WarnContext(ctx, "queued task had no queue message; queued again", "task_id", st.TaskID)
	return true, nil
}

// Sweep makes the state store agree with the work queue: every task whose
// record has said queued for longer than minAge and whose message is
// missing is queued again. It returns how many were. `wrench serve` runs it
// every minute, so a task can never stay queued with nothing in the queue.
func (s *Submissions) Sweep(ctx context.Context, minAge time.Duration) (int, error) {
	c := s.c
	entries, err := c.queuedEntries(ctx, time.Now().Add(-minAge))
	if err != nil {
		return 0, fmt.Errorf("sweep: %w", err)
	}
	n := 0
	for _, e := range entries {
		requeued, err := c.requeueIfLost(ctx, e)
		if err != nil {
			return n, fmt.Errorf("sweep: %w", err)
		}
		if requeued {
			n++
		}
	}
	return n, nil
}

// Cancel cancels task id. A queued task becomes cancelled at once and never
// runs. For a running task a cancellation request is recorded, which reaches
// the worker running it (within a second or two) and stops its sandbox; the
// returned status is still the running one, and the worker writes the final
// cancelled result. A final task is left unchanged. Unknown ids give an
// error wrapping [task.ErrNotFound].
func (s *Submissions) Cancel(ctx context.Context, id string) (task.Status, error) {
	st, _, err := s.CancelReport(ctx, id)
	return st, err
}

// CancelReport is [Submissions.Cancel] that also says whether this call
// turned a queued task into a cancelled one (true exactly once per task,
// however many cancels race), so callers can count it as finished.
func (s *Submissions) CancelReport(ctx context.Context, id string) (st task.Status, cancelledQueued bool, err error) {
	c := s.c
	if !validID(id) {
		return task.Status{}, false, fmt.Errorf("%w: %q", task.ErrNotFound, id)
	}
	for range casRetries {
		e, err := c.get(ctx, id)
		if errors.Is(err, task.ErrNotFound) {
			return c.cancelUnrecorded(ctx, id)
		}
		if err != nil {
			return task.Status{}, false, err
		}
		switch {
		case e.st.State.Final():
			return e.st, false, nil
		case e.st.State == task.StateQueued || e.st.State == task.StatePaused:
			st := cancelledWaiting(e.st)
			_, err := c.update(ctx, st, e.rev)
			if isConflict(err) {
				continue
			}
			if err != nil {
				return task.Status{}, false, fmt.Errorf("cancel %s: %w", id, err)
			}
			c.dropQueuedMessage(ctx, id)
			if e.st.State == task.StatePaused {
				c.forgetPaused(ctx, id)
			}
			c.emit(ctx, task.Event{TaskID: id, Kind: task.EventResult, State: st.State, Result: st.Result})
			return st, true, nil
		default:
			if _, err := c.kv.Put(ctx, cancelKey(id), []byte(time.Now().UTC().Format(time.RFC3339Nano))); err != nil {
				return task.Status{}, false, fmt.Errorf("cancel %s: record request: %w", id, err)
			}
			// The worker may have handed the task back between the read
			// and the request: look again.
			e2, err := c.get(ctx, id)
			if err != nil {
				return task.Status{}, false, err
			}
			if e2.st.State == task.StateQueued || e2.st.State == task.StatePaused {
				continue
			}
			return e2.st, false, nil
		}
	}
	return task.Status{}, false, fmt.Errorf("cancel %s: too many concurrent updates", id)
}

// cancelledWaiting is the record of a queued or paused task cancelled: a
// paused one's result keeps what its attempts spent and names the
// artifacts of its work so far.
func cancelledWaiting(st task.Status) task.Status {
	now := time.Now().UTC()
	res := &task.Result{TaskID: st.TaskID, Status: task.StateCancelled, Reason: "cancelled while " + string(st.State), Attempt: st.Attempt,
		Tenant: tenantOf(&st), FinishedAt: now}
	if st.Spent != nil {
		res.Usage = *st.Spent
	}
	if st.Pause != nil {
		res.Artifacts = st.Pause.Artifacts
	}
	st.State, st.Reason, st.UpdatedAt, st.Result, st.Pause = task.StateCancelled, res.Reason, now, res, nil
	return st
}

// cancelUnrecorded cancels a task that is in the work queue without a state
// record; written says whether this call recorded the cancellation.
func (c *Conn) cancelUnrecorded(ctx context.Context, id string) (st task.Status, written bool, err error) {
	qst, err := c.fromQueue(ctx, id)
	if err != nil {
		return task.Status{}, false, err
	}
	res := task.Result{Status: task.StateCancelled, Reason: "cancelled while queued"}
	st, written, err = c.states.Settle(ctx, id, qst.Task, res)
	if err != nil {
		return task.Status{}, false, fmt.Errorf("cancel %s: %w", id, err)
	}
	if written {
		c.dropQueuedMessage(ctx, id)
		c.emit(ctx, resultEvent(st))
	}
	return st, written, nil
}

// dropQueuedMessage deletes a cancelled task's message from the work queue so
// no worker receives it. Best effort: a worker that gets it anyway sees the
// final state and acks it without running.
func (c *Conn) dropQueuedMessage(ctx context.Context, id string) {
	m, err := c.lastTaskMsg(ctx, id)
	if err != nil {
		return
	}
	if err := c.tasks.DeleteMsg(ctx, m.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		c.log.DebugContext(ctx, "drop cancelled task message", "task_id", id, "err", err)
	}
}

func validID(id string) bool { return task.ValidID(id) }

// notPublished is a failure before a task's publish was attempted.
type notPublished struct{ err error }

func (e *notPublished) Error() string { return e.err.Error() }
func (e *notPublished) Unwrap() error { return e.err }
