package queue_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// TestEffectsClaimFencing: a live claim keeps others out; an expired one
// is taken over with a larger token; the old holder's Check, Begin and
// Done then fail with ErrFenced; a done effect is not begun again.
func TestEffectsClaimFencing(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	fx := c.Effects()
	ctx := context.Background()
	a, err := fx.Claim(ctx, "t1", "worker-a", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fx.Claim(ctx, "t1", "worker-b", time.Minute); !errors.Is(err, queue.ErrClaimed) {
		t.Fatalf("second claim while the first is live: %v, want ErrClaimed", err)
	}
	if _, err := a.Begin(ctx, "comment.result"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond) // a is paused past its claim
	b, err := fx.Claim(ctx, "t1", "worker-b", time.Minute)
	if err != nil {
		t.Fatalf("claim after expiry: %v", err)
	}
	if b.Token() <= a.Token() {
		t.Errorf("token %d after %d: tokens must grow", b.Token(), a.Token())
	}
	prior, err := b.Begin(ctx, "comment.result")
	if err != nil || prior.State != queue.EffectPending || prior.Token != a.Token() {
		t.Fatalf("b.Begin = %+v, %v; want a's pending record", prior, err)
	}
	if _, err := a.Check(ctx); !errors.Is(err, queue.ErrFenced) {
		t.Errorf("a.Check after takeover: %v, want ErrFenced", err)
	}
	if err := a.Done(ctx, "comment.result", "1"); !errors.Is(err, queue.ErrFenced) {
		t.Errorf("a.Done after takeover: %v, want ErrFenced", err)
	}
	if _, err := b.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Done(ctx, "comment.result", "2"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Begin(ctx, "comment.result"); !errors.Is(err, queue.ErrFenced) {
		t.Errorf("a.Begin on b's record: %v, want ErrFenced", err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c2, err := fx.Claim(ctx, "t1", "worker-c", time.Minute)
	if err != nil {
		t.Fatalf("claim after release: %v", err)
	}
	if prior, err := c2.Begin(ctx, "comment.result"); err != nil || prior.State != queue.EffectDone || prior.Ref != "2" {
		t.Errorf("Begin on a done effect = %+v, %v; want done with ref 2", prior, err)
	}
	list, err := fx.List(ctx, "t1")
	if err != nil || len(list) != 1 || list[0].Name != "comment.result" || list[0].State != queue.EffectDone {
		t.Errorf("List = %+v, %v", list, err)
	}
}

// TestEffectsClaimRace: many holders race for one task's claim; exactly
// one holds it at a time, and each effect is done once.
func TestEffectsClaimRace(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	fx := c.Effects()
	ctx := context.Background()
	var acted atomic.Int64
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for range 20 {
				cl, err := fx.Claim(ctx, "race", "w", time.Minute)
				if errors.Is(err, queue.ErrClaimed) {
					time.Sleep(time.Millisecond)
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				prior, err := cl.Begin(ctx, "pull_request")
				if err == nil && prior.State != queue.EffectDone {
					if _, err := cl.Check(ctx); err == nil {
						acted.Add(1)
						if err := cl.Done(ctx, "pull_request", "pr"); err != nil {
							t.Errorf("holder %d: %v", i, err)
						}
					}
				}
				_ = cl.Release(ctx)
				return
			}
		})
	}
	wg.Wait()
	if n := acted.Load(); n != 1 {
		t.Errorf("the effect was carried out %d times, want 1", n)
	}
}

// TestSetPullRequest: a final result gets the pull request it became; a
// running task is left alone.
func TestSetPullRequest(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	ctx := context.Background()
	tk := newTask("t-pr")
	submit(t, c, tk)
	if err := c.States().SetPullRequest(ctx, tk.ID, "https://gh/pull/1"); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.States().Status(ctx, tk.ID); st.Result != nil {
		t.Fatalf("a queued task got a result: %+v", st.Result)
	}
	lease, _, err := c.States().Acquire(ctx, tk, queue.Claim{Attempt: 1, Worker: "w"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lease.Finish(ctx, task.Result{Status: task.StateResolved}); err != nil {
		t.Fatal(err)
	}
	if err := c.States().SetPullRequest(ctx, tk.ID, "https://gh/pull/1"); err != nil {
		t.Fatal(err)
	}
	st, err := c.States().Status(ctx, tk.ID)
	if err != nil || st.Result.PullRequestURL != "https://gh/pull/1" || st.State != task.StateResolved {
		t.Errorf("status %+v, %v", st.Result, err)
	}
}
