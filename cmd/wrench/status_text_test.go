package main

import (
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// `wrench status` says where a task resumed and how many attempts workers
// handed back through no fault of the task.
func TestStatusTextSaysResumedAndHandedBack(t *testing.T) {
	now := time.Now()
	st := task.Status{TaskID: "t1", State: task.StateResolved, CreatedAt: now, Attempt: 3,
		Result: &task.Result{Status: task.StateResolved, Reason: "finished", Attempt: 3, HandedBack: 1,
			Resumed: "resumed at turn 5 after worker w1 stopped responding on attempt 1"}}
	out := statusText(st, now)
	for _, want := range []string{"resumed at turn 5 after worker w1 stopped responding on attempt 1", "1 attempt(s) handed back"} {
		if !strings.Contains(out, want) {
			t.Errorf("status text lacks %q:\n%s", want, out)
		}
	}
}
