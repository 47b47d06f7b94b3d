package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/task"
)

// resultGrace is how long Events waits, after the state turned final, for
// the result event to arrive before it makes one up from the state record
// (the event may have aged out, or its publisher died before sending it).
const resultGrace = time.Second

// Events is the event stream of a [Conn]: what happens to each task, in
// order, for followers (`wrench watch`, the SSE endpoint).
type Events struct{ c *Conn }

// resultTry bounds one try at publishing a result event; a leader being
// elected leaves a publish unanswered.
const resultTry = 5 * time.Second

// Publish publishes ev on wrench.events.<ev.TaskID>, stamping its Time
// when zero. Seq is assigned by the stream and reported by [Events.Follow].
//
// A result event (Kind [task.EventResult]) ends every follower's stream and
// is counted once per task, so it is not given up on a fault that passes
// by itself: it is tried again, each try within resultTry, until the stream
// stores it or ctx ends. It carries the Nats-Msg-Id "<id>.result", so a try
// whose acknowledgement was lost (the stream's leader killed after
// storing it) and the tries after it store it once within the stream's
// duplicate window.
func (e *Events) Publish(ctx context.Context, ev task.Event) error {
	if !validID(ev.TaskID) {
		return fmt.Errorf("publish event: invalid task id %q", ev.TaskID)
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	ev.Seq = 0
	data, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("publish event of %s: encode: %w", ev.TaskID, err)
	}
	subject := EventSubjectPrefix + ev.TaskID
	if ev.Kind == task.EventResult {
		err = e.publishResult(ctx, subject, data, ev.TaskID+".result")
	} else {
		_, err = e.c.js.Publish(ctx, subject, data)
	}
	if err != nil {
		return fmt.Errorf("publish %s event of %s: %w", ev.Kind, ev.TaskID, err)
	}
	return nil
}

// publishResult publishes a result event under msgID until it is stored,
// an error that does not pass by itself, or the end of ctx.
func (e *Events) publishResult(ctx context.Context, subject string, data []byte, msgID string) error {
	backoff := e.c.cfg.BindRetry
	wait := backoff.Min
	for attempt := 1; ; attempt++ {
		tctx, cancel := context.WithTimeout(ctx, resultTry)
		_, err := e.c.js.Publish(tctx, subject, data, jetstream.WithMsgID(msgID))
		cancel()
		if err == nil {
			return nil
		}
		waitingFor := awaited(e.c.nc, err)
		if waitingFor == "" || ctx.Err() != nil {
			return err
		}
		e.c.log.WarnContext(ctx, "result event not stored; publishing again", "msg_id", msgID,
			"waiting_for", waitingFor, "attempt", attempt, "retry_in", wait, "err", err)
		if !sleep(ctx, wait) {
			return err
		}
		wait = backoff.next(wait)
	}
}

// emit publishes ev best effort: events are a view, the state record is the
// truth.
func (c *Conn) emit(ctx context.Context, ev task.Event) {
	if err := c.evs.Publish(ctx, ev); err != nil {
		c.log.WarnContext(ctx, "publish event", "task_id", ev.TaskID, "kind", ev.Kind, "err", err)
	}
}

// Follow streams the events of task id whose Seq is greater than fromSeq
// (0: all that are stored): first the stored ones, then live ones as they are
// published. Each event's Seq is its stream sequence, usable as an SSE event
// id to resume from. The channel is closed after the result event, or when
// ctx is done. When the task is final but its result event is not stored
// (aged out), a result event is made from the state record. An unknown id
// gives an error wrapping [task.ErrNotFound].
func (e *Events) Follow(ctx context.Context, id string, fromSeq uint64) (<-chan task.Event, error) {
	c := e.c
	if _, err := c.states.Status(ctx, id); err != nil {
		return nil, err
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{EventSubjectPrefix + id}, InactiveThreshold: followerInactive}
	if fromSeq > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = fromSeq + 1
	}
	cons, err := c.events.OrderedConsumer(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("follow events of %s: %w", id, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	msgs := make(chan jetstream.Msg, 64)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case msgs <- m:
		case <-ctx.Done():
		}
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("follow events of %s: %w", id, err)
	}
	w, err := c.kv.Watch(ctx, stateKey(id))
	if err != nil {
		cc.Stop()
		cancel()
		return nil, fmt.Errorf("follow state of %s: %w", id, err)
	}
	out := make(chan task.Event)
	go func() {
		defer close(out)
		defer cancel()
		defer func() { _ = w.Stop() }()
		defer e.dropConsumer(cons)
		defer cc.Stop()
		var final *task.Status
		grace := time.NewTimer(time.Hour)
		grace.Stop()
		defer grace.Stop()
		send := func(ev task.Event) bool {
			select {
			case out <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for {
			select {
			case <-ctx.Done():
				return
			case m := <-msgs:
				var ev task.Event
				if err := json.Unmarshal(m.Data(), &ev); err != nil {
					c.log.WarnContext(ctx, "skip undecodable event", "task_id", id, "err", err)
					continue
				}
				if md, err := m.Metadata(); err == nil {
					ev.Seq = md.Sequence.Stream
				}
				if !send(ev) || ev.Kind == task.EventResult {
					return
				}
				if final != nil {
					grace.Reset(resultGrace)
				}
			case u, ok := <-w.Updates():
				if !ok {
					return
				}
				if u == nil || u.Operation() != jetstream.KeyValuePut || final != nil {
					continue
				}
				var st task.Status
				if json.Unmarshal(u.Value(), &st) == nil && st.State.Final() {
					final = &st
					grace.Reset(resultGrace)
				}
			case <-grace.C:
				send(resultEvent(*final))
				return
			}
		}
	}()
	return out, nil
}

// followerInactive is when the server drops a follower's consumer that
// nobody deleted (its process died): the client deletes it on every
// other ending.
const followerInactive = time.Minute

// dropConsumer deletes a follower's consumer on the server: stopping it
// client-side leaves it, with its goroutines and buffers in an embedded
// server, until it is inactive (each GET …/events used to leave about
// three goroutines and 31 KB for five minutes).
func (e *Events) dropConsumer(cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.c.events.DeleteConsumer(ctx, info.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		e.c.log.Debug("delete event follower", "consumer", info.Name, "err", err)
	}
}

// resultEvent is the result event for a final status.
func resultEvent(st task.Status) task.Event {
	ev := task.Event{TaskID: st.TaskID, Time: st.UpdatedAt, Kind: task.EventResult, State: st.State, Result: st.Result}
	if ev.Result == nil {
		ev.Result = &task.Result{TaskID: st.TaskID, Status: st.State, Reason: st.Reason, Attempt: st.Attempt, Worker: st.Worker, FinishedAt: st.UpdatedAt}
	}
	return ev
}

// ResultEvent returns the result event announcing st (which must be final).
func ResultEvent(st task.Status) task.Event { return resultEvent(st) }
