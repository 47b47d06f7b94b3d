package queue_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// settledGoroutines waits for the goroutine count to stop falling to at
// most limit and returns it.
func settledGoroutines(limit int) int {
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(10 * time.Second); n > limit && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(20 * time.Millisecond)
		runtime.GC()
	}
	return n
}

// Followers that go away, and followers of a task that ends, leave
// nothing behind: each GET …/events used to leave 2–3 goroutines and
// 31 KB for good.
func TestHostileClient_EventFollowersReleaseEverything(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	submit(t, c, newTask("t-leak"))
	ctx := context.Background()
	follow := func(n int, drain bool) {
		for range n {
			fctx, cancel := context.WithCancel(ctx)
			ch, err := c.Events().Follow(fctx, "t-leak", 0)
			if err != nil {
				t.Fatal(err)
			}
			<-ch // the queued state
			if !drain {
				cancel()
			}
			for range ch {
			}
			cancel()
		}
	}
	follow(5, false) // warm up the connection's own goroutines
	base := settledGoroutines(0)
	follow(100, false)
	n := settledGoroutines(base + 5)
	t.Logf("100 followers that went away left %d goroutines (%d before)", n-base, base)
	if n > base+5 {
		t.Errorf("100 followers that went away left %d goroutines (%d before)", n-base, base)
	}
	res := task.Result{TaskID: "t-leak", Status: task.StateRejected, Reason: "done"}
	if _, _, err := c.States().Settle(ctx, "t-leak", nil, res); err != nil {
		t.Fatal(err)
	}
	if err := c.Events().Publish(ctx, task.Event{TaskID: "t-leak", Kind: task.EventResult, State: res.Status, Result: &res}); err != nil {
		t.Fatal(err)
	}
	follow(100, true)
	n = settledGoroutines(base + 5)
	t.Logf("100 followers of an ended task left %d goroutines (%d before)", n-base, base)
	if n > base+5 {
		t.Errorf("100 followers of an ended task left %d goroutines (%d before)", n-base, base)
	}
}
