package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// ledger is what the queue itself holds of the run's tasks, read behind
// the API's back at the end.
type ledger struct {
	// finals counts, per task, the distinct final outcomes in its state
	// record's history: a final state, attempt and finish time. A later
	// write of the same outcome (publishing adds the pull request's URL)
	// is not another one.
	finals map[string]int
	// results counts the result events per task.
	results map[string]int
	// spent sums the usage events per task: every attempt's model calls,
	// the killed ones' included.
	spent map[string]task.Usage
	// events keeps the events of the tasks a fault was aimed at, in
	// stream order.
	events map[string][]task.Event
}

// readLedger reads the state bucket's history of ids and the whole
// events stream.
func readLedger(ctx context.Context, q Queue, ids []string, keep map[string]bool) (*ledger, error) {
	nc, err := q.Dial()
	if err != nil {
		return nil, fmt.Errorf("dial NATS: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	l := &ledger{finals: map[string]int{}, results: map[string]int{}, spent: map[string]task.Usage{}, events: map[string][]task.Event{}}
	if err := l.readStates(ctx, js, ids); err != nil {
		return nil, err
	}
	return l, l.readEvents(ctx, js, keep)
}

func (l *ledger) readStates(ctx context.Context, js jetstream.JetStream, ids []string) error {
	kv, err := js.KeyValue(ctx, queue.StateBucket)
	if err != nil {
		return fmt.Errorf("open the state bucket: %w", err)
	}
	for _, id := range ids {
		hist, err := kv.History(ctx, "task."+id)
		if err != nil {
			return fmt.Errorf("history of %s: %w", id, err)
		}
		values := make([][]byte, len(hist))
		for i, e := range hist {
			values[i] = e.Value()
		}
		l.finals[id] = finalOutcomes(values)
	}
	return nil
}

// finalOutcomes counts the distinct final outcomes among a state
// record's revisions.
func finalOutcomes(revisions [][]byte) int {
	seen := map[string]bool{}
	for _, v := range revisions {
		var st task.Status
		if json.Unmarshal(v, &st) != nil || !st.State.Final() {
			continue
		}
		outcome := fmt.Sprintf("%s/%d", st.State, st.Attempt)
		if st.Result != nil {
			outcome += "/" + st.Result.FinishedAt.Format(time.RFC3339Nano)
		}
		seen[outcome] = true
	}
	return len(seen)
}

func (l *ledger) readEvents(ctx context.Context, js jetstream.JetStream, keep map[string]bool) error {
	stream, err := js.Stream(ctx, queue.EventsStream)
	if err != nil {
		return fmt.Errorf("open the events stream: %w", err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return err
	}
	// A batch at a time from where the last one stopped, on a fresh
	// ordered consumer each: on a cluster a consumer can go (its server
	// restarted, "no responders"), and a read is then tried again.
	next, last := info.State.FirstSeq, info.State.LastSeq
	for tries := 0; info.State.Msgs > 0 && next <= last; {
		got, err := l.readBatch(ctx, stream, next, keep)
		next += got
		if got > 0 {
			tries = 0
			continue
		}
		if tries++; tries > 10 {
			return fmt.Errorf("read events from %d of %d: %w", next, last, err)
		}
		sleep(ctx, time.Second)
	}
	return nil
}

// readBatch reads up to 1000 events from sequence from and returns how
// far it got (the next sequence minus from).
func (l *ledger) readBatch(ctx context.Context, stream jetstream.Stream, from uint64, keep map[string]bool) (uint64, error) {
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from})
	if err != nil {
		return 0, err
	}
	batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		return 0, err
	}
	next := from
	for m := range batch.Messages() {
		if md, err := m.Metadata(); err == nil && md.Sequence.Stream >= next {
			next = md.Sequence.Stream + 1
		}
		l.add(m, keep)
	}
	if next == from {
		err = batch.Error()
		if err == nil {
			err = errors.New("no events")
		}
	}
	return next - from, err
}

// awaitIdle waits, bounded, until the workers' consumer has nothing
// pending or unacknowledged.
func awaitIdle(ctx context.Context, q Queue, within time.Duration) error {
	nc, err := q.Dial()
	if err != nil {
		return fmt.Errorf("dial NATS: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(within)
	for {
		c, err := js.Consumer(ctx, queue.TasksStream, queue.WorkersConsumer)
		if err == nil {
			info, ierr := c.Info(ctx)
			if ierr == nil && info.NumPending == 0 && info.NumAckPending == 0 {
				return nil
			}
			err = ierr
			if err == nil {
				err = fmt.Errorf("%d pending, %d unacknowledged", info.NumPending, info.NumAckPending)
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the queue is not idle after %s: %w", within, err)
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

// add counts one event message.
func (l *ledger) add(m jetstream.Msg, keep map[string]bool) {
	var ev task.Event
	if json.Unmarshal(m.Data(), &ev) != nil {
		return
	}
	if md, err := m.Metadata(); err == nil {
		ev.Seq = md.Sequence.Stream
	}
	switch ev.Kind {
	case task.EventResult:
		l.results[ev.TaskID]++
	case task.EventUsage:
		if ev.Usage != nil {
			l.spent[ev.TaskID] = l.spent[ev.TaskID].Add(*ev.Usage)
		}
	}
	if keep[ev.TaskID] {
		ev.Text = ""
		l.events[ev.TaskID] = append(l.events[ev.TaskID], ev)
	}
}
