package dispatcher_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/dispatcher"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// recordingFinalizer records the tasks it finalizes, failing for those in
// fail.
type recordingFinalizer struct {
	q    *fakeQueue
	fail map[string]bool

	mu    sync.Mutex
	calls []string
	ended []int // deliveries of the task already settled when called
}

func (f *recordingFinalizer) Finalize(_ context.Context, st task.Status) error {
	f.q.mu.Lock()
	ended := 0
	for _, a := range f.q.acks[st.TaskID] {
		if a != "in progress" {
			ended++
		}
	}
	f.q.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, st.TaskID+" "+string(st.State))
	f.ended = append(f.ended, ended)
	if st.TaskID == "t-claimed" {
		return fmt.Errorf("publish: %w", claimed{})
	}
	if f.fail[st.TaskID] {
		return errors.New("github down")
	}
	return nil
}

// claimed is a finalize failure that says when to try again.
type claimed struct{}

func (claimed) Error() string             { return "effects claimed by another worker" }
func (claimed) RetryAfter() time.Duration { return 2 * time.Second }

func (f *recordingFinalizer) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// TestFinalizer: the finalizer runs on every final result after it is
// stored and before the delivery is settled (finished, failed, buried,
// rejected), again on a redelivery of a final task, and a failure hands
// the delivery back for another try, except on the last delivery.
func TestFinalizer(t *testing.T) {
	q := newFakeQueue()
	r := newFakeRunner()
	r.behave = func(ctx context.Context, tk task.Task, attempt int, _ func(task.Event)) task.Report {
		switch tk.ID {
		case "t-fail", "t-down", "t-down-last":
			return task.Report{Result: task.Result{Status: task.StateFailed, Reason: "tests fail"}}
		case "t-infra-last":
			return task.Report{Result: task.Result{Status: task.StateFailed, Reason: "engine gone"}, Retry: true}
		}
		return resolved(tk)
	}
	fin := &recordingFinalizer{q: q, fail: map[string]bool{"t-down": true, "t-down-last": true}}
	cfg := dispatcher.Config{AckWait: time.Minute, MaxDeliver: 3, Backoff: []time.Duration{7 * time.Second},
		FetchWait: 20 * time.Millisecond, Finalizer: fin}
	d, err := dispatcher.New(q.queue(), r, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runDispatcher(t, d)
	body := func(id string) []byte {
		b, _ := json.Marshal(newTask(id))
		return b
	}
	final := newTask("t-final")
	q.mu.Lock()
	q.states["t-final"] = task.Status{TaskID: "t-final", Task: &final, State: task.StateResolved}
	q.mu.Unlock()
	for _, c := range []struct {
		id        string
		attempt   int
		data      []byte
		wantAck   string
		wantCalls int
	}{
		{"t-ok", 1, body("t-ok"), "ack", 1},
		{"t-fail", 1, body("t-fail"), "ack", 1},
		{"t-infra-last", 3, body("t-infra-last"), "term dead", 1},
		{"t-final", 2, body("t-final"), "ack", 1},
		{"t-down", 1, body("t-down"), "nak 7s", 1},
		{"t-down", 2, body("t-down"), "nak 7s", 2},
		{"t-down-last", 3, body("t-down-last"), "ack", 1},
		{"t-claimed", 1, body("t-claimed"), "nak 2s", 1},
		{"t-bad", 1, []byte(`{"id":"t-bad","instruction":"x","repo":{}}`), "ack", 1}, // rejected by the runner
	} {
		q.deliver(t, c.id, c.attempt, c.data)
		acks := q.waitEnded(t, c.id)
		if last := acks[len(acks)-1]; last != c.wantAck {
			t.Errorf("%s attempt %d: acks %v, want it to end with %q", c.id, c.attempt, acks, c.wantAck)
		}
		n := 0
		for _, s := range fin.seen() {
			if strings.HasPrefix(s, c.id+" ") {
				n++
			}
		}
		if n != c.wantCalls {
			t.Errorf("%s attempt %d: finalized %d times, want %d (%v)", c.id, c.attempt, n, c.wantCalls, fin.seen())
		}
	}
	// A task whose worker died on its last delivery is dead-lettered by
	// whichever dispatcher gets the advisory, and finalized there.
	dead := newTask("t-dead")
	q.buried <- queue.Buried{TaskID: "t-dead", Reason: "deliveries exhausted (3)", Settled: true,
		Status: task.Status{TaskID: "t-dead", Task: &dead, State: task.StateFailed, Result: &task.Result{Status: task.StateFailed}}}
	deadline := time.Now().Add(waitLimit)
	for !slices.Contains(fin.seen(), "t-dead failed") {
		if time.Now().After(deadline) {
			t.Fatalf("the dead-lettered task was never finalized: %v", fin.seen())
		}
		time.Sleep(10 * time.Millisecond)
	}
	fin.mu.Lock()
	defer fin.mu.Unlock()
	earlier := map[string]int{}
	for i, call := range fin.calls {
		name, _, _ := strings.Cut(call, " ")
		if fin.ended[i] != earlier[name] {
			t.Errorf("%s: finalized after its delivery was settled", call)
		}
		earlier[name]++
	}
	if got := r.runs("t-final"); len(got) != 0 {
		t.Errorf("a final task ran again: %v", got)
	}
}
