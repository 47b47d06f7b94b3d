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

// Submit validates t, fills its ID (when empty) and CreatedAt, records it as
// queued and publishes it on the work queue with Nats-Msg-Id = ID.
//
// An invalid task returns a *[task.ValidationError] and is not queued. A
// task whose ID is already known is not queued again: Submit returns the
// existing status with duplicate = true. (If that task is still queued and
// was created within the duplicate window, its message is published again
// with the same Nats-Msg-Id, which the stream drops if it already has it:
// so a Submit retried after a lost reply can never leave a task recorded but
// not queued.)
//
// With a Propagator configured, the trace context of ctx travels in the
// message headers to the worker.
func (c *Conn) Submit(ctx context.Context, t task.Task) (st task.Status, duplicate bool, err error) {
	if err := t.Validate(); err != nil {
		return task.Status{}, false, err
	}
	if t.ID == "" {
		t.ID = task.NewID()
	}
	now := time.Now().UTC()
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now
	}
	st = task.Status{TaskID: t.ID, State: task.StateQueued, Task: &t, CreatedAt: t.CreatedAt, UpdatedAt: now}
	_, err = c.create(ctx, st)
	if isConflict(err) {
		e, gerr := c.get(ctx, t.ID)
		if gerr != nil {
			return task.Status{}, false, fmt.Errorf("submit %s: %w", t.ID, gerr)
		}
		if e.st.State == task.StateQueued && e.st.Task != nil && now.Sub(e.st.CreatedAt) < c.cfg.DuplicateWindow {
			if err := c.publishTask(ctx, *e.st.Task); err != nil {
				return task.Status{}, false, err
			}
		}
		return e.st, true, nil
	}
	if err != nil {
		return task.Status{}, false, fmt.Errorf("submit %s: record state: %w", t.ID, err)
	}
	if err := c.publishTask(ctx, t); err != nil {
		// Leave no record of a task that is not queued. If the publish
		// did land (its reply was lost), the dispatcher recreates the
		// record from the message.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = c.kv.Purge(dctx, stateKey(t.ID))
		return task.Status{}, false, err
	}
	c.emit(ctx, task.Event{TaskID: t.ID, Kind: task.EventState, State: task.StateQueued})
	return st, false, nil
}

func (c *Conn) publishTask(ctx context.Context, t task.Task) error {
	data, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("submit %s: encode: %w", t.ID, err)
	}
	msg := &nats.Msg{Subject: TaskSubjectPrefix + t.ID, Data: data, Header: nats.Header{}}
	if p := c.cfg.Propagator; p != nil {
		p.Inject(ctx, headerCarrier(msg.Header))
	}
	if _, err := c.js.PublishMsg(ctx, msg, jetstream.WithMsgID(t.ID), jetstream.WithExpectStream(TasksStream)); err != nil {
		return fmt.Errorf("submit %s: publish: %w", t.ID, err)
	}
	return nil
}

// Status returns the current status of task id, or an error wrapping
// [ErrNotFound].
func (c *Conn) Status(ctx context.Context, id string) (task.Status, error) {
	if !validID(id) {
		return task.Status{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	e, err := c.get(ctx, id)
	if err != nil {
		return task.Status{}, err
	}
	return e.st, nil
}

// Cancel cancels task id. A queued task becomes cancelled at once and never
// runs. For a running task a cancellation request is recorded, which reaches
// the worker running it (within a second or two) and stops its sandbox; the
// returned status is still the running one, and the worker writes the final
// cancelled result. A final task is left unchanged. Unknown ids give an
// error wrapping [ErrNotFound].
func (c *Conn) Cancel(ctx context.Context, id string) (task.Status, error) {
	if !validID(id) {
		return task.Status{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	for range casRetries {
		e, err := c.get(ctx, id)
		if err != nil {
			return task.Status{}, err
		}
		switch {
		case e.st.State.Final():
			return e.st, nil
		case e.st.State == task.StateQueued:
			now := time.Now().UTC()
			st := e.st
			st.State = task.StateCancelled
			st.Reason = "cancelled while queued"
			st.UpdatedAt = now
			st.Result = &task.Result{TaskID: id, Status: task.StateCancelled, Reason: st.Reason, Attempt: st.Attempt, FinishedAt: now}
			_, err := c.update(ctx, st, e.rev)
			if isConflict(err) {
				continue
			}
			if err != nil {
				return task.Status{}, fmt.Errorf("cancel %s: %w", id, err)
			}
			c.dropQueuedMessage(ctx, id)
			c.emit(ctx, task.Event{TaskID: id, Kind: task.EventResult, State: st.State, Result: st.Result})
			return st, nil
		default:
			if _, err := c.kv.Put(ctx, cancelKey(id), []byte(time.Now().UTC().Format(time.RFC3339Nano))); err != nil {
				return task.Status{}, fmt.Errorf("cancel %s: record request: %w", id, err)
			}
			// The worker may have handed the task back between the read
			// and the request: look again.
			e2, err := c.get(ctx, id)
			if err != nil {
				return task.Status{}, err
			}
			if e2.st.State == task.StateQueued {
				continue
			}
			return e2.st, nil
		}
	}
	return task.Status{}, fmt.Errorf("cancel %s: too many concurrent updates", id)
}

// dropQueuedMessage deletes a cancelled task's message from the work queue so
// no worker receives it. Best effort: a worker that gets it anyway sees the
// final state and acks it without running.
func (c *Conn) dropQueuedMessage(ctx context.Context, id string) {
	m, err := c.tasks.GetLastMsgForSubject(ctx, TaskSubjectPrefix+id)
	if err != nil {
		return
	}
	if err := c.tasks.DeleteMsg(ctx, m.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		c.log.Debug("drop cancelled task message", "task", id, "err", err)
	}
}

func validID(id string) bool {
	t := task.Task{ID: id, Repo: task.Repo{URL: "x"}, Instruction: "x"}
	return id != "" && t.Validate() == nil
}
