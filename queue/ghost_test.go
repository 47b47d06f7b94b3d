package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/queue/natsserver"
	"github.com/wrenchworks/wrench/task"
)

// putRecord writes a state record behind the queue's back.
func putRecord(t *testing.T, kv jetstream.KeyValue, st task.Status) {
	t.Helper()
	b, _ := json.Marshal(st)
	if _, err := kv.Put(context.Background(), "task."+st.TaskID, b); err != nil {
		t.Fatal(err)
	}
}

// subjectMsgs is how many messages the work queue holds for task id.
func subjectMsgs(t *testing.T, js jetstream.JetStream, id string) uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), queue.TasksStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(queue.TaskSubjectPrefix+id))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[queue.TaskSubjectPrefix+id]
}

// A record that says queued with nothing in the queue (a ghost) is queued
// again by the sweeper, once; records with a message, or not queued, are
// left alone.
func TestSweepRequeuesGhosts(t *testing.T) {
	s := startNATS(t, "")
	c := connect(t, s)
	ctx := context.Background()
	js := natstest.JetStream(t, s)
	kv, err := js.KeyValue(ctx, queue.StateBucket)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().UTC().Add(-time.Hour)
	ghost := newTask("t-ghost")
	putRecord(t, kv, task.Status{TaskID: ghost.ID, State: task.StateQueued, Task: &ghost, CreatedAt: old, UpdatedAt: old})
	young := newTask("t-young")
	putRecord(t, kv, task.Status{TaskID: young.ID, State: task.StateQueued, Task: &young, CreatedAt: time.Now(), UpdatedAt: time.Now()})
	running := newTask("t-running")
	putRecord(t, kv, task.Status{TaskID: running.ID, State: task.StateRunning, Task: &running, CreatedAt: old, UpdatedAt: old})
	submit(t, c, newTask("t-fine"))

	var wg sync.WaitGroup
	counts := make([]int, 3)
	for i := range counts {
		wg.Go(func() {
			n, err := c.Submissions().Sweep(ctx, time.Minute)
			if err != nil {
				t.Error(err)
			}
			counts[i] = n
		})
	}
	wg.Wait()
	if total := counts[0] + counts[1] + counts[2]; total != 1 {
		t.Fatalf("sweeps queued %v tasks again, want 1 in all", counts)
	}
	for id, want := range map[string]uint64{"t-ghost": 1, "t-young": 0, "t-running": 0, "t-fine": 1} {
		if n := subjectMsgs(t, js, id); n != want {
			t.Errorf("%s: %d messages, want %d", id, n, want)
		}
	}
	if n, err := c.Submissions().Sweep(ctx, time.Minute); err != nil || n != 0 {
		t.Fatalf("second sweep: %d, %v", n, err)
	}
}

// A task in the queue without a state record (its record was not written,
// or aged out) is reported queued, is a duplicate when submitted again (and
// recorded then), and can be cancelled.
func TestUnrecordedQueuedTask(t *testing.T) {
	s := startNATS(t, "")
	c := connect(t, s)
	ctx := context.Background()
	js := natstest.JetStream(t, s)
	tk := newTask("t-norec")
	b, _ := json.Marshal(tk)
	if _, err := js.Publish(ctx, queue.TaskSubjectPrefix+tk.ID, b, jetstream.WithMsgID(tk.ID)); err != nil {
		t.Fatal(err)
	}
	st, err := c.States().Status(ctx, tk.ID)
	if err != nil || st.State != task.StateQueued || st.Task == nil || st.Task.Instruction != tk.Instruction {
		t.Fatalf("status = %+v, %v", st, err)
	}
	if _, dup, err := c.Submissions().Submit(ctx, tk); err != nil || !dup {
		t.Fatalf("resubmit: dup=%v, %v", dup, err)
	}
	if n := subjectMsgs(t, js, tk.ID); n != 1 {
		t.Fatalf("%d messages after resubmit, want 1", n)
	}
	other := newTask("t-norec2")
	b, _ = json.Marshal(other)
	if _, err := js.Publish(ctx, queue.TaskSubjectPrefix+other.ID, b); err != nil {
		t.Fatal(err)
	}
	st, err = c.Submissions().Cancel(ctx, other.ID)
	if err != nil || st.State != task.StateCancelled {
		t.Fatalf("cancel = %+v, %v", st, err)
	}
	if n := subjectMsgs(t, js, other.ID); n != 0 {
		t.Fatalf("cancelled task still has %d messages", n)
	}
}

// NATS stops (and comes back) many times while submissions go on. Every
// answer is true to what happened: a task answered as queued is queued, a
// task answered "not queued" left nothing behind, an unconfirmed one is
// queued at most once; submitting every unanswered id again queues it, and
// no record says queued with nothing in the queue.
func TestSubmitWhileNATSStops(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	start := func() *natsserver.Server {
		var srv *natsserver.Server
		waitFor(t, "nats to start", func() bool {
			srv, err = natsserver.Start(context.Background(), natsserver.Config{DataDir: dir, Listen: addr})
			return err == nil
		})
		return srv
	}
	srv := start()
	defer func() { srv.Shutdown() }()
	url := "nats://" + addr
	c, err := queue.Connect(context.Background(), queue.Config{URL: url, ApplyLayout: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	type outcome struct{ ok, dup, notQueued, unconfirmed bool }
	var mu sync.Mutex
	outcomes := map[string]outcome{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("t-o%d-%04d", g, i)
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, dup, err := c.Submissions().Submit(ctx, newTask(id))
				cancel()
				o := outcome{ok: err == nil && !dup, dup: err == nil && dup,
					notQueued: errors.Is(err, task.ErrNotQueued), unconfirmed: errors.Is(err, task.ErrUnconfirmed)}
				if err != nil && !o.notQueued && !o.unconfirmed {
					t.Errorf("%s: an error that says nothing of what happened: %v", id, err)
				}
				mu.Lock()
				outcomes[id] = o
				mu.Unlock()
				if err != nil {
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const outages = 10
	for range outages {
		time.Sleep(time.Duration(150+rng.IntN(250)) * time.Millisecond)
		srv.Shutdown()
		time.Sleep(time.Duration(100+rng.IntN(200)) * time.Millisecond)
		srv = start()
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	waitFor(t, "the client to reconnect", func() bool { return c.Ready() == nil })
	time.Sleep(500 * time.Millisecond) // publishes buffered during the last outage land

	ctx := context.Background()
	js := natstest.Dial(t, url)
	kv, err := js.KeyValue(ctx, queue.StateBucket)
	if err != nil {
		t.Fatal(err)
	}
	var counts struct{ ok, notQueued, unconfirmed int }
	var retry []string
	for id, o := range outcomes {
		n := subjectMsgs(t, js, id)
		_, recErr := kv.Get(ctx, "task."+id)
		switch {
		case o.ok || o.dup:
			counts.ok++
			if n != 1 {
				t.Errorf("%s answered queued, has %d messages", id, n)
			}
		case o.notQueued:
			counts.notQueued++
			retry = append(retry, id)
			if n != 0 || recErr == nil {
				t.Errorf("%s answered not queued, has %d messages and record error %v", id, n, recErr)
			}
		case o.unconfirmed:
			counts.unconfirmed++
			retry = append(retry, id)
			if n > 1 {
				t.Errorf("%s unconfirmed, has %d messages", id, n)
			}
		}
	}
	t.Logf("%d outages: %d queued, %d not queued, %d unconfirmed", outages, counts.ok, counts.notQueued, counts.unconfirmed)
	if counts.notQueued+counts.unconfirmed == 0 {
		t.Fatal("no submission met an outage: the test tested nothing")
	}
	for _, id := range retry {
		if _, _, err := c.Submissions().Submit(ctx, newTask(id)); err != nil {
			t.Fatalf("resubmit %s: %v", id, err)
		}
		if n := subjectMsgs(t, js, id); n != 1 {
			t.Errorf("%s resubmitted: %d messages, want 1", id, n)
		}
	}
	queued, _, err := c.States().List(ctx, task.ListOptions{State: task.StateQueued, Limit: task.MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range queued {
		if subjectMsgs(t, js, st.TaskID) != 1 {
			t.Errorf("%s is recorded queued with nothing in the queue", st.TaskID)
		}
	}
	if n, err := c.Submissions().Sweep(ctx, 0); err != nil || n != 0 {
		t.Errorf("sweep after the outages queued %d again (%v): ghosts were left", n, err)
	}
}
