package dispatcher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/dispatcher"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// fakeQueue is an in-memory dispatcher.Queue: deliveries are handed in by
// the test, and every acknowledgement is recorded.
type fakeQueue struct {
	deliveries chan *dispatcher.Delivery

	mu     sync.Mutex
	states map[string]task.Status
	acks   map[string][]string // task id -> "ack", "nak 5s", "term", "term dead", "reissue"
	ended  chan string         // task id of every ended delivery
	opened queue.ConsumerConfig
	buried chan queue.Buried // what BuryExhausted hands out
}

func newFakeQueue() *fakeQueue {
	return &fakeQueue{deliveries: make(chan *dispatcher.Delivery, 16), states: map[string]task.Status{},
		acks: map[string][]string{}, ended: make(chan string, 16), buried: make(chan queue.Buried, 4)}
}

func (q *fakeQueue) queue() dispatcher.Queue {
	return dispatcher.Queue{Work: fakeWork{q}, States: fakeStates{q}, Events: fakeSink{}, Artifacts: fakeSink{}}
}

// deliver hands the dispatcher a delivery of tk (raw body when data is
// set).
func (q *fakeQueue) deliver(t *testing.T, id string, attempt int, data []byte) {
	t.Helper()
	q.deliveries <- &dispatcher.Delivery{TaskID: id, Data: data, Attempt: attempt, Published: time.Now(),
		Acker: &fakeAcker{q: q, id: id}}
}

func (q *fakeQueue) record(id, what string, final bool) {
	q.mu.Lock()
	q.acks[id] = append(q.acks[id], what)
	q.mu.Unlock()
	if final {
		q.ended <- id
	}
}

// waitEnded waits for the delivery of id to end and returns its acks.
func (q *fakeQueue) waitEnded(t *testing.T, id string) []string {
	t.Helper()
	select {
	case got := <-q.ended:
		if got != id {
			t.Fatalf("delivery of %s ended, want %s", got, id)
		}
	case <-time.After(waitLimit):
		t.Fatalf("delivery of %s never ended", id)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.acks[id]...)
}

func (q *fakeQueue) state(id string) task.Status {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.states[id]
}

type fakeAcker struct {
	q  *fakeQueue
	id string
}

func (a *fakeAcker) Ack(context.Context) error { a.q.record(a.id, "ack", true); return nil }
func (a *fakeAcker) Nak(d time.Duration) error {
	a.q.record(a.id, fmt.Sprintf("nak %s", d), true)
	return nil
}
func (a *fakeAcker) Term(_ context.Context, reason string) error {
	what := "term"
	if reason != "" {
		what = "term dead"
	}
	a.q.record(a.id, what, true)
	return nil
}
func (a *fakeAcker) InProgress() error { a.q.record(a.id, "in progress", false); return nil }
func (a *fakeAcker) Reissue(ctx context.Context, _ bool) error {
	a.q.record(a.id, "reissue", true)
	return nil
}

type fakeWork struct{ q *fakeQueue }

func (w fakeWork) Open(_ context.Context, cc queue.ConsumerConfig) error {
	w.q.mu.Lock()
	w.q.opened = cc
	w.q.mu.Unlock()
	return nil
}

func (w fakeWork) Next(ctx context.Context, wait time.Duration) (*dispatcher.Delivery, error) {
	select {
	case d := <-w.q.deliveries:
		return d, nil
	case <-time.After(wait):
		return nil, nil
	}
}

func (fakeWork) Lag(context.Context) (uint64, uint64, error) { return 0, 0, nil }

func (w fakeWork) BuryExhausted(ctx context.Context, wait time.Duration) (queue.Buried, error) {
	select {
	case <-ctx.Done():
	case b := <-w.q.buried:
		return b, nil
	case <-time.After(wait):
	}
	return queue.Buried{}, nil
}

type fakeStates struct{ q *fakeQueue }

func (s fakeStates) Acquire(_ context.Context, t task.Task, cl queue.Claim) (dispatcher.Lease, task.Status, error) {
	attempt, worker := cl.Attempt, cl.Worker
	s.q.mu.Lock()
	defer s.q.mu.Unlock()
	st := s.q.states[t.ID]
	if st.State.Final() {
		return nil, st, fmt.Errorf("%s: %w", t.ID, queue.ErrFinal)
	}
	st = task.Status{TaskID: t.ID, Task: &t, State: task.StateRunning, Attempt: attempt, Worker: worker}
	s.q.states[t.ID] = st
	return &fakeLease{q: s.q, id: t.ID}, st, nil
}

func (s fakeStates) Settle(_ context.Context, id string, t *task.Task, res task.Result) (task.Status, bool, error) {
	s.q.mu.Lock()
	defer s.q.mu.Unlock()
	if st := s.q.states[id]; st.State.Final() {
		return st, false, nil
	}
	res.TaskID = id
	st := task.Status{TaskID: id, Task: t, State: res.Status, Reason: res.Reason, Result: &res}
	s.q.states[id] = st
	return st, true, nil
}

func (fakeStates) CancelRequested(context.Context, string) (bool, error) { return false, nil }

func (fakeStates) WatchCancels(ctx context.Context) (<-chan string, error) {
	ch := make(chan string)
	go func() {
		<-ctx.Done()
		close(ch)
	}()
	return ch, nil
}

type fakeLease struct {
	q  *fakeQueue
	id string
}

func (l *fakeLease) Update(context.Context, func(*task.Status)) error { return nil }
func (l *fakeLease) Touch(context.Context) error                      { return nil }

func (l *fakeLease) Finish(_ context.Context, res task.Result) (task.Status, error) {
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	res.TaskID = l.id
	st := task.Status{TaskID: l.id, Task: l.q.states[l.id].Task, State: res.Status, Reason: res.Reason, Result: &res}
	l.q.states[l.id] = st
	return st, nil
}

func (l *fakeLease) Previous() task.Status { return task.Status{} }
func (l *fakeLease) Status() task.Status   { return task.Status{} }

func (l *fakeLease) Requeue(_ context.Context, reason string, _ *task.Usage) error {
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	st := l.q.states[l.id]
	st.State, st.Reason = task.StateQueued, reason
	l.q.states[l.id] = st
	return nil
}

func (l *fakeLease) Pause(_ context.Context, p task.Pause, spent *task.Usage, _ []byte) error {
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	st := l.q.states[l.id]
	st.State, st.Reason, st.Pause, st.Spent = task.StatePaused, p.Reason, &p, spent
	l.q.states[l.id] = st
	return nil
}

type fakeSink struct{}

func (fakeSink) Publish(context.Context, task.Event) error { return nil }
func (fakeSink) Put(_ context.Context, _ string, a map[string][]byte) ([]string, error) {
	var names []string
	for n := range a {
		names = append(names, n)
	}
	return names, nil
}

// Each way a delivery can end reaches the queue as the right
// acknowledgement, with no server: the dispatcher's side of the ack
// mapping (TestDecide has the mapping itself).
func TestAcknowledgementsWithoutAServer(t *testing.T) {
	q := newFakeQueue()
	r := newFakeRunner()
	r.behave = func(ctx context.Context, tk task.Task, attempt int, _ func(task.Event)) task.Report {
		switch tk.ID {
		case "t-infra", "t-infra-last":
			return task.Report{Result: task.Result{Status: task.StateFailed, Reason: "engine gone"}, Retry: true}
		case "t-fail":
			return task.Report{Result: task.Result{Status: task.StateFailed, Reason: "clone: not found"}}
		}
		return resolved(tk)
	}
	cfg := dispatcher.Config{AckWait: time.Minute, MaxDeliver: 3, Backoff: []time.Duration{7 * time.Second}, FetchWait: 20 * time.Millisecond}
	d, err := dispatcher.New(q.queue(), r, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runDispatcher(t, d)
	body := func(id string) []byte {
		b, _ := json.Marshal(newTask(id))
		return b
	}
	q.mu.Lock()
	q.states["t-final"] = task.Status{TaskID: "t-final", State: task.StateResolved}
	q.mu.Unlock()
	for _, c := range []struct {
		id      string
		attempt int
		data    []byte
		want    string
		state   task.State
	}{
		{"t-ok", 1, body("t-ok"), "ack", task.StateResolved},
		{"t-fail", 3, body("t-fail"), "ack", task.StateFailed},
		{"t-infra", 1, body("t-infra"), "nak 7s", task.StateQueued},
		{"t-infra-last", 3, body("t-infra-last"), "term dead", task.StateFailed},
		{"t-final", 2, body("t-final"), "ack", task.StateResolved},
		{"t-bad", 1, []byte(`{"id": "t-bad"}`), "ack", task.StateRejected}, // rejected by the runner
		{"t-undecodable", 1, []byte(`{"id": "t-undecodable", "bogus": 1}`), "term", task.StateRejected},
		{"t-other", 1, body("t-mismatch"), "term", task.StateRejected},
	} {
		q.deliver(t, c.id, c.attempt, c.data)
		acks := q.waitEnded(t, c.id)
		if last := acks[len(acks)-1]; last != c.want {
			t.Errorf("%s: acks %v, want it to end with %q", c.id, acks, c.want)
		}
		if st := q.state(c.id); st.State != c.state {
			t.Errorf("%s: state %q (%s), want %q", c.id, st.State, st.Reason, c.state)
		}
	}
	if got := r.runs("t-final"); len(got) != 0 {
		t.Errorf("a final task ran again: %v", got)
	}
	if q.opened.AckWait != time.Minute || q.opened.MaxDeliver != 3 {
		t.Errorf("consumer opened with %+v", q.opened)
	}
}

// budgetSink records how long each result event's publish was given.
type budgetSink struct {
	fakeSink
	budgets chan time.Duration
}

func (s budgetSink) Publish(ctx context.Context, ev task.Event) error {
	if ev.Kind == task.EventResult {
		deadline, ok := ctx.Deadline()
		if !ok {
			deadline = time.Now().Add(time.Hour)
		}
		s.budgets <- time.Until(deadline)
	}
	return nil
}

// A result event is given time to outlast a NATS leader election (its
// publish is tried again until stored); with the ten seconds of other
// events, a leader killed as a task finished lost the task's result event.
func TestResultEventOutlastsElection(t *testing.T) {
	q := newFakeQueue()
	sink := budgetSink{budgets: make(chan time.Duration, 1)}
	fq := q.queue()
	fq.Events = sink
	d, err := dispatcher.New(fq, newFakeRunner(), dispatcher.Config{AckWait: time.Minute, FetchWait: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runDispatcher(t, d)
	b, _ := json.Marshal(newTask("t-budget"))
	q.deliver(t, "t-budget", 1, b)
	q.waitEnded(t, "t-budget")
	select {
	case got := <-sink.budgets:
		if got < 30*time.Second {
			t.Fatalf("result event publish given %v, want at least 30s", got)
		}
	case <-time.After(time.Second):
		t.Fatal("no result event published")
	}
}
