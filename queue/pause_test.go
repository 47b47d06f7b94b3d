package queue_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// testPause is a budget pause on repoAccount on 2030-01-02.
func testPause(need float64) task.Pause {
	return task.Pause{Reason: task.ReasonBudget, Account: repoAccount, Day: "2030-01-02", SpentUSD: 0.98, NeedUSD: need,
		At: time.Now().UTC(), Free: 1, Artifacts: []string{"patch.diff", "log.txt"}}
}

// pauseFirstDelivery submits tk, takes its first delivery, pauses it with
// what it spent (as the dispatcher does: lease.Pause, then Ack) and
// returns the pause.
func pauseFirstDelivery(t *testing.T, c *queue.Conn, tk task.Task) task.Pause {
	t.Helper()
	return pauseWith(t, c, tk, testPause(0.05))
}

func pauseWith(t *testing.T, c *queue.Conn, tk task.Task, p task.Pause) task.Pause {
	t.Helper()
	ctx := context.Background()
	submit(t, c, tk)
	d := nextDelivery(t, c.Work())
	lease, _, err := c.States().Acquire(ctx, tk, queue.Claim{Attempt: d.Attempt, Worker: "w1", Message: d.StreamSeq, Live: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Pause(ctx, p, &task.Usage{InputTokens: 1000, CostUSD: 0.5, Turns: 4}, d.Data); err != nil {
		t.Fatal(err)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lease.Touch(ctx); !errors.Is(err, queue.ErrLostLease) {
		t.Errorf("the lease still writes after the pause: %v", err)
	}
	return p
}

// TestPauseAndResume: a paused task has no message in the work queue and
// a record that says why and what it spent; Paused lists it. Resumed (by
// two callers at once), it is queued once, as a message that carries its
// deliveries so far (the paused one free: the next is attempt 2 with one
// free) and its original body (its URL's credentials, which the record
// never keeps). Resuming what is not paused is refused.
func TestPauseAndResume(t *testing.T) {
	c := connect(t, startNATS(t, t.TempDir()))
	w := c.Work()
	ctx := context.Background()
	if err := w.Open(ctx, queue.ConsumerConfig{AckWait: time.Minute, MaxDeliver: 3}); err != nil {
		t.Fatal(err)
	}
	tk := newTask("t-pause")
	tk.Repo.URL = "https://x-access-token:s3cret-tok@example.com/r.git"
	p := pauseFirstDelivery(t, c, tk)

	st, err := c.States().Status(ctx, tk.ID)
	if err != nil || st.State != task.StatePaused || st.Reason != task.ReasonBudget || st.Pause == nil || st.Pause.Day != p.Day ||
		st.Spent == nil || st.Spent.CostUSD != 0.5 || st.Spent.Turns != 0 {
		t.Fatalf("status %+v (pause %+v) %v", st, st.Pause, err)
	}
	if pending, acks, err := w.Lag(ctx); err != nil || pending+acks != 0 {
		t.Fatalf("work queue: %d pending, %d unacked, %v; want empty", pending, acks, err)
	}
	paused, err := c.States().Paused(ctx)
	if err != nil || len(paused) != 1 || paused[0].TaskID != tk.ID {
		t.Fatalf("paused = %v, %v", paused, err)
	}

	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { _, errs[i] = c.Submissions().ResumeFor(ctx, tk.ID, "the day rolled over") })
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) || !errors.Is(errors.Join(errs...), task.ErrNotPaused) {
		t.Fatalf("racing resumes: %v; want one to resume and the other to find it not paused", errs)
	}
	st, _ = c.States().Status(ctx, tk.ID)
	if st.State != task.StateQueued || st.Reason != "a budget pause (the day rolled over)" || st.Pause != nil {
		t.Fatalf("after resume: %+v", st)
	}
	d := nextDelivery(t, w)
	if d.Earlier+d.Attempt != 2 || d.Free != 1 || !strings.Contains(string(d.Data), "s3cret-tok") {
		t.Fatalf("resumed delivery: earlier %d attempt %d free %d, body %s", d.Earlier, d.Attempt, d.Free, d.Data)
	}
	if extra, err := w.Next(ctx, 300*time.Millisecond); err != nil || extra != nil {
		t.Fatalf("a second message: %+v %v", extra, err)
	}
	if _, err := c.Submissions().Resume(ctx, tk.ID); !errors.Is(err, task.ErrNotPaused) {
		t.Errorf("resuming a queued task: %v", err)
	}
	if _, err := c.Submissions().Resume(ctx, "t-nope"); !errors.Is(err, task.ErrNotFound) {
		t.Errorf("resuming an unknown task: %v", err)
	}
}

// TestCancelPaused: cancelling a paused task ends it at once; its result
// keeps what it spent and names the artifacts of its work so far.
func TestCancelPaused(t *testing.T) {
	c := connect(t, startNATS(t, t.TempDir()))
	ctx := context.Background()
	if err := c.Work().Open(ctx, queue.ConsumerConfig{AckWait: time.Minute, MaxDeliver: 3}); err != nil {
		t.Fatal(err)
	}
	tk := newTask("t-pause-cancel")
	pauseFirstDelivery(t, c, tk)
	st, cancelled, err := c.Submissions().CancelReport(ctx, tk.ID)
	if err != nil || !cancelled || st.State != task.StateCancelled || st.Result == nil {
		t.Fatalf("cancel: %+v %v %v", st, cancelled, err)
	}
	if r := st.Result; r.Reason != "cancelled while paused" || r.Usage.CostUSD != 0.5 || len(r.Artifacts) != 2 || st.Pause != nil {
		t.Errorf("result %+v", r)
	}
	if _, err := c.Submissions().Resume(ctx, tk.ID); !errors.Is(err, task.ErrNotPaused) {
		t.Errorf("resuming a cancelled task: %v", err)
	}
}

// A tenant's paused task is queued again on its tenant's subjects, so it
// keeps its place in the tenants' turns.
func TestResumedTaskKeepsItsTenant(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	w := c.Work()
	ctx := context.Background()
	if err := w.Open(ctx, queue.ConsumerConfig{AckWait: time.Minute, MaxDeliver: 3}); err != nil {
		t.Fatal(err)
	}
	tk := newTask("t-tpause")
	tk.Tenant = "acme"
	pauseFirstDelivery(t, c, tk)
	if _, err := c.Submissions().Resume(ctx, tk.ID); err != nil {
		t.Fatal(err)
	}
	d := nextDelivery(t, w)
	if d.TaskID != tk.ID {
		t.Fatalf("delivered %s", d.TaskID)
	}
	if s := d.Subject(); s != queue.TaskSubject("acme", tk.ID) {
		t.Fatalf("resumed on %s, want its tenant's subject", s)
	}
}

// TestResumeWithinBudget: serve's sweep resumes paused tasks once their
// budget has room for their next call, oldest first and no more than the
// room: nothing while the day's cap is spent, two of three when the cap is
// raised by enough for two, the last on the next day (the clock is the
// sweep's argument).
func TestResumeWithinBudget(t *testing.T) {
	c := connect(t, startNATS(t, t.TempDir()))
	ctx := context.Background()
	if err := c.Work().Open(ctx, queue.ConsumerConfig{AckWait: time.Minute, MaxDeliver: 3}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"t-b1", "t-b2", "t-b3"} {
		pauseWith(t, c, newTask(id), testPause(0.3))
	}
	day1 := time.Date(2030, 1, 2, 23, 0, 0, 0, time.UTC)
	h, err := c.Budgets().Reserve(ctx, "2030-01-02", []task.BudgetAccount{repoAccount}, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Budgets().Settle(ctx, h, 0.9); err != nil {
		t.Fatal(err)
	}
	capped := func(d float64) func(task.Task) []task.BudgetAccount {
		return func(task.Task) []task.BudgetAccount {
			a := repoAccount
			a.DailyUSD = d
			return []task.BudgetAccount{a}
		}
	}
	n, _, err := c.Submissions().ResumeWithinBudget(ctx, capped(1), day1)
	if err != nil || n != 0 {
		t.Fatalf("$0.10 left, $0.30 needed: resumed %d, %v", n, err)
	}
	n, _, err = c.Submissions().ResumeWithinBudget(ctx, capped(1.6), day1)
	if err != nil || n != 2 {
		t.Fatalf("cap raised to $1.60 ($0.70 left): resumed %d, %v; want 2", n, err)
	}
	states := func() []task.State {
		var out []task.State
		for _, id := range []string{"t-b1", "t-b2", "t-b3"} {
			st, _ := c.States().Status(ctx, id)
			out = append(out, st.State)
		}
		return out
	}
	if got := states(); got[0] != task.StateQueued || got[1] != task.StateQueued || got[2] != task.StatePaused {
		t.Fatalf("states %v; want the two oldest queued", got)
	}
	n, waiting, err := c.Submissions().ResumeWithinBudget(ctx, capped(1), day1.Add(2*time.Hour))
	if err != nil || n != 1 || waiting != 0 {
		t.Fatalf("the next day: resumed %d, %d waiting, %v", n, waiting, err)
	}
	if st, _ := c.States().Status(ctx, "t-b3"); st.Reason != "a budget pause (the day rolled over)" {
		t.Errorf("t-b3: %q", st.Reason)
	}
	if st, _ := c.States().Status(ctx, "t-b1"); st.Reason != "a budget pause (its budget allows it again)" {
		t.Errorf("t-b1: %q", st.Reason)
	}
}

// TestHandOffRacesProgress: progress writes racing a pause or a requeue
// (the heartbeat and the event pump write while the run ends) never set
// the handed-back record running again; each is refused as a lost lease
// or lands before the hand-off. Before the hand-off and the release were
// one critical section, a write let in between made a paused task say
// running, and `wrench resume` refused it.
func TestHandOffRacesProgress(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	w := c.Work()
	ctx := context.Background()
	if err := w.Open(ctx, queue.ConsumerConfig{AckWait: time.Minute, MaxDeliver: 100}); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		tk := newTask("t-race-" + strconv.Itoa(i))
		submit(t, c, tk)
		d := nextDelivery(t, w)
		lease, _, err := c.States().Acquire(ctx, tk, queue.Claim{Attempt: d.Attempt, Worker: "w1", Message: d.StreamSeq, Live: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					p := task.Progress{Turn: n}
					if err := lease.Update(ctx, func(s *task.Status) { s.Progress = &p }); errors.Is(err, queue.ErrLostLease) {
						return
					}
				}
			})
		}
		time.Sleep(time.Millisecond)
		want := task.StatePaused
		if i%2 == 0 {
			err = lease.Pause(ctx, testPause(0.05), nil, d.Data)
		} else {
			want = task.StateQueued
			err = lease.Requeue(ctx, "handed back", nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
		close(stop)
		wg.Wait()
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		st, err := c.States().Status(ctx, tk.ID)
		if err != nil || st.State != want || st.Progress != nil {
			t.Fatalf("%s after the hand-off with progress racing: state %s progress %+v (%v); want %s", tk.ID, st.State, st.Progress, err, want)
		}
	}
}

// The paused attempt's own message delivered again (its ack was lost)
// does not run the task: it is a duplicate to end. The message a resume
// publishes does run it, even when it arrives before the record says
// queued. The stale message once restarted a budget-paused task
// (cmd/wrench TestBudgetPausesAndContinues).
func TestPausedTasksOwnMessageIsStale(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	ctx := context.Background()
	tk := newTask("t-paused-stale")
	submit(t, c, tk)
	l, _, err := c.States().Acquire(ctx, tk, queue.Claim{Attempt: 1, Worker: "w", Message: 7, Live: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Pause(ctx, task.Pause{Reason: task.ReasonBudget}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, st, err := c.States().Acquire(ctx, tk, queue.Claim{Attempt: 2, Worker: "w", Message: 7, Live: time.Minute}); !errors.Is(err, queue.ErrDuplicate) || st.State != task.StatePaused {
		t.Fatalf("the paused message again: %v, state %s; want a duplicate, still paused", err, st.State)
	}
	if _, st, err := c.States().Acquire(ctx, tk, queue.Claim{Attempt: 2, Worker: "w", Message: 9, Live: time.Minute}); err != nil || st.State != task.StateRunning {
		t.Fatalf("a resume's message: %v, state %s; want it running", err, st.State)
	}
}
