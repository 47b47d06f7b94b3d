package queue_test

import (
	"context"
	"testing"

	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// Every final result names the task's tenant: a finished run, a settled
// (rejected, dead-lettered) task and a task cancelled while queued; a task
// without one is the default tenant's.
func TestResultsCarryTheTenant(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	ctx := context.Background()

	fin := newTask("t-fin")
	fin.Tenant = "payments"
	submit(t, c, fin)
	l, _, err := c.States().Acquire(ctx, fin, queue.Claim{Attempt: 1, Worker: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := l.Finish(ctx, task.Result{Status: task.StateResolved})
	if err != nil || st.Result.Tenant != "payments" || st.Task.Tenant != "payments" {
		t.Fatalf("finished: %+v %v", st.Result, err)
	}

	set := newTask("t-set")
	set.Tenant = "web"
	submit(t, c, set)
	st, _, err = c.States().Settle(ctx, set.ID, &set, task.Result{Status: task.StateRejected, Reason: "bad"})
	if err != nil || st.Result.Tenant != "web" {
		t.Fatalf("settled: %+v %v", st.Result, err)
	}

	can := newTask("t-can")
	submit(t, c, can)
	st, err = c.Submissions().Cancel(ctx, can.ID)
	if err != nil || st.Result.Tenant != task.DefaultTenant {
		t.Fatalf("cancelled: %+v %v", st.Result, err)
	}
}
