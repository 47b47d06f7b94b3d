package dispatcher_test

import (
	"context"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/dispatcher"
	"github.com/wrenchworks/wrench/task"
)

// TestPausedTaskWaitsAndContinues: a run that a budget stopped leaves the
// task paused, not final: its message acked (nothing redelivers it), its
// work's artifacts stored, its spend in the record. Resumed, it runs again
// as its second attempt, told why and what the first spent, and its pause
// does not count toward its deliveries (MaxDeliver 1 still lets it run).
func TestPausedTaskWaitsAndContinues(t *testing.T) {
	e := startNATS(t, "")
	c := connect(t, e)
	obs := newRecordingObserver()
	r := newFakeRunner()
	var told task.Redelivery
	r.behave = func(ctx context.Context, tk task.Task, attempt int, _ func(task.Event)) task.Report {
		if attempt == 1 {
			p := &task.Pause{Reason: task.ReasonBudget, Account: task.BudgetAccount{Scope: task.BudgetRepository, Name: "r", DailyUSD: 1},
				Day: "2030-01-02", SpentUSD: 0.99, NeedUSD: 0.1}
			return task.Report{
				Result:    task.Result{Status: task.StatePaused, Reason: "budget: " + p.String(), Usage: task.Usage{CostUSD: 0.3, ModelCalls: 3, Turns: 3}},
				Artifacts: map[string][]byte{"patch.diff": []byte("--- a\n+++ b\n")},
				Pause:     p,
			}
		}
		told = task.RedeliveryOf(ctx)
		rep := resolved(tk)
		rep.Result.Usage = told.Spent.Add(task.Usage{CostUSD: 0.1, ModelCalls: 1})
		return rep
	}
	runDispatcher(t, newDispatcher(t, c, r, dispatcher.Config{Slots: 1, WorkerID: "w", MaxDeliver: 1, Observer: obs}))
	tk := newTask("t-paused")
	submit(t, c, tk)
	st := waitState(t, c, tk.ID, task.StatePaused)
	if st.Reason != task.ReasonBudget || st.Pause == nil || st.Pause.Free != 1 || st.Spent == nil || st.Spent.CostUSD != 0.3 {
		t.Fatalf("paused record %+v (pause %+v)", st, st.Pause)
	}
	if len(st.Pause.Artifacts) != 1 || st.Pause.Artifacts[0] != "patch.diff" {
		t.Fatalf("artifacts %v", st.Pause.Artifacts)
	}
	waitFor(t, "the observer to count the pause", func() bool { return obs.count("paused:t-paused:budget") == 1 })
	time.Sleep(500 * time.Millisecond) // a redelivery would come now
	if got := r.runs(tk.ID); len(got) != 1 {
		t.Fatalf("runs %v while paused", got)
	}

	if _, err := c.Submissions().Resume(context.Background(), tk.ID); err != nil {
		t.Fatal(err)
	}
	st = waitFinal(t, c, tk.ID)
	if st.State != task.StateResolved || st.Result.Attempt != 2 || st.Result.HandedBack != 1 {
		t.Fatalf("final %+v; want resolved on attempt 2 with the paused one free", st.Result)
	}
	if told.Cause != "a budget pause (resumed by hand)" || told.Spent.CostUSD != 0.3 || st.Result.Usage.CostUSD != 0.4 {
		t.Errorf("second attempt told %+v; result usage %+v", told, st.Result.Usage)
	}
	if got := r.runs(tk.ID); len(got) != 2 || got[1] != 2 {
		t.Errorf("runs %v, want attempts 1 and 2", got)
	}
}
