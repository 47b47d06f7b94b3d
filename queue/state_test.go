package queue_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

func TestAcquireFinalTaskReportsFinal(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	ctx := context.Background()
	tk := newTask("t-f")
	submit(t, c, tk)
	l, _, err := c.States().Acquire(ctx, tk, queue.Claim{Attempt: 1, Worker: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Finish(ctx, task.Result{Status: task.StateResolved}); err != nil {
		t.Fatal(err)
	}
	_, st, err := c.States().Acquire(ctx, tk, queue.Claim{Attempt: 2, Worker: "w2"})
	if !errors.Is(err, queue.ErrFinal) || st.State != task.StateResolved {
		t.Fatalf("Acquire of final task = %v, %v; want ErrFinal and the resolved status", st.State, err)
	}
}

func TestAcquireRecordsRunningAndCreatesMissingRecord(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	tk := newTask("t-norecord") // never submitted: published by someone else
	l, st, err := c.States().Acquire(context.Background(), tk, queue.Claim{Attempt: 3, Worker: "w9"})
	if err != nil {
		t.Fatal(err)
	}
	if st.State != task.StateRunning || st.Attempt != 3 || st.Worker != "w9" || st.Task == nil || st.CreatedAt.IsZero() {
		t.Fatalf("status = %+v", st)
	}
	if l.Status().State != task.StateRunning {
		t.Fatalf("lease status = %+v", l.Status())
	}
}

// Two workers holding leases of different deliveries: the later takes over,
// and only one final result is ever written.
func TestTakeoverAllowsOneFinalResult(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	ctx := context.Background()
	tk := newTask("t-race")
	submit(t, c, tk)
	old, _, err := c.States().Acquire(ctx, tk, queue.Claim{Attempt: 1, Worker: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	cur, _, err := c.States().Acquire(ctx, tk, queue.Claim{Attempt: 2, Worker: "w2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Touch(ctx); !errors.Is(err, queue.ErrLostLease) {
		t.Fatalf("old Touch err = %v, want ErrLostLease", err)
	}
	if _, err := old.Finish(ctx, task.Result{Status: task.StateResolved}); !errors.Is(err, queue.ErrLostLease) {
		t.Fatalf("old Finish err = %v, want ErrLostLease", err)
	}
	st, err := cur.Finish(ctx, task.Result{Status: task.StateUnresolved, Reason: "tests_failed"})
	if err != nil {
		t.Fatal(err)
	}
	if st.State != task.StateUnresolved || st.Result.Worker != "w2" || st.Result.Attempt != 2 {
		t.Fatalf("final = %+v", st)
	}
	// Retrying a Finish that landed succeeds with the same status.
	again, err := cur.Finish(ctx, task.Result{Status: task.StateUnresolved, Reason: "tests_failed", FinishedAt: st.Result.FinishedAt})
	if err != nil || again.State != task.StateUnresolved {
		t.Fatalf("retried Finish = %+v, %v", again, err)
	}
}

func TestConcurrentFinishWritesExactlyOnce(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	ctx := context.Background()
	tk := newTask("t-conc")
	submit(t, c, tk)
	l, _, err := c.States().Acquire(ctx, tk, queue.Claim{Attempt: 1, Worker: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for _, s := range []task.State{task.StateFailed, task.StateRejected, task.StateCancelled} {
		wg.Go(func() {
			_, written, err := c.States().Settle(ctx, tk.ID, nil, task.Result{Status: s})
			if err != nil {
				t.Error(err)
			}
			if written {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		})
	}
	wg.Go(func() {
		if _, err := l.Finish(ctx, task.Result{Status: task.StateResolved}); err == nil {
			mu.Lock()
			wins++
			mu.Unlock()
		} else if !errors.Is(err, queue.ErrLostLease) {
			t.Error(err)
		}
	})
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d final writes won, want exactly 1", wins)
	}
}

func TestLeaseUpdateAndRequeue(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	ctx := context.Background()
	tk := newTask("t-upd")
	submit(t, c, tk)
	l, _, err := c.States().Acquire(ctx, tk, queue.Claim{Attempt: 1, Worker: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Update(ctx, func(s *task.Status) {
		s.State = task.StateVerifying
		s.Progress = &task.Progress{Turn: 3, LastTool: "bash"}
	}); err != nil {
		t.Fatal(err)
	}
	st, _ := c.States().Status(ctx, tk.ID)
	if st.State != task.StateVerifying || st.Progress == nil || st.Progress.Turn != 3 || st.Worker != "w1" {
		t.Fatalf("status = %+v", st)
	}
	if err := l.Requeue(ctx, "retry: docker down", nil); err != nil {
		t.Fatal(err)
	}
	st, _ = c.States().Status(ctx, tk.ID)
	if st.State != task.StateQueued || st.Reason != "retry: docker down" || st.Progress != nil {
		t.Fatalf("status after requeue = %+v", st)
	}
	// Once handed back, the lease is no longer good.
	if err := l.Touch(ctx); !errors.Is(err, queue.ErrLostLease) {
		t.Fatalf("Touch after requeue err = %v, want ErrLostLease", err)
	}
}

func TestSettleRejectsNonFinalAndKeepsFinal(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	ctx := context.Background()
	if _, _, err := c.States().Settle(ctx, "t-s", nil, task.Result{Status: task.StateRunning}); err == nil {
		t.Fatal("Settle accepted a non-final state")
	}
	st, written, err := c.States().Settle(ctx, "t-s", nil, task.Result{Status: task.StateRejected, Reason: "bad"})
	if err != nil || !written || st.State != task.StateRejected {
		t.Fatalf("Settle = %+v, %v, %v", st, written, err)
	}
	st, written, err = c.States().Settle(ctx, "t-s", nil, task.Result{Status: task.StateFailed})
	if err != nil || written || st.State != task.StateRejected {
		t.Fatalf("second Settle = %+v, %v, %v; want the first kept", st, written, err)
	}
}

func TestArtifactsRoundTrip(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	ctx := context.Background()
	names, err := c.Artifacts().Put(ctx, "t-a", map[string][]byte{"trajectory.jsonl": []byte("{}\n"), "patch.diff": []byte("diff")})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 || names[0] != "patch.diff" || names[1] != "trajectory.jsonl" {
		t.Fatalf("names = %v", names)
	}
	b, err := c.Artifacts().Get(ctx, "t-a", "trajectory.jsonl")
	if err != nil || string(b) != "{}\n" {
		t.Fatalf("Artifact = %q, %v", b, err)
	}
	if _, err := c.Artifacts().Get(ctx, "t-a", "log.txt"); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("missing artifact err = %v", err)
	}
	if _, err := c.Artifacts().Put(ctx, "t-a", map[string][]byte{"../x": nil}); err == nil {
		t.Fatal("PutArtifacts accepted a path")
	}
}

func TestHugeResultIsStoredWithoutInlinePatch(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	ctx := context.Background()
	tk := newTask("t-huge")
	submit(t, c, tk)
	l, _, err := c.States().Acquire(ctx, tk, queue.Claim{Attempt: 1, Worker: "w"})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("+x\n", 1<<20) // 3 MiB, over the 1 MiB message limit
	st, err := l.Finish(ctx, task.Result{Status: task.StateResolved, Patch: big, TestsAfter: &task.TestRun{Output: "ok"}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := c.States().Status(ctx, tk.ID)
	if got.State != task.StateResolved || got.Result.Patch != "" || got.Result.TestsAfter.Output != "ok" || st.State != task.StateResolved {
		t.Fatalf("stored %+v", got.Result)
	}
}
