package github_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/github"
	"github.com/wrenchworks/wrench/github/githubtest"
	"github.com/wrenchworks/wrench/task"
)

// publishUntilDone publishes as a redelivering dispatcher would: again
// while another holder has the claim.
func publishUntilDone(t *testing.T, p *github.Publisher, tk task.Task, r task.Result) {
	t.Helper()
	for range 500 {
		_, err := p.Publish(context.Background(), tk, r)
		if err == nil {
			return
		}
		if !errors.Is(err, github.ErrEffectsClaimed) && !errors.Is(err, github.ErrFenced) {
			t.Errorf("publish: %v", err)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Error("publish never got the claim")
}

// TestRacingPublishersOnePullRequest: four workers sharing a ledger
// publish the same task at once, twenty times over: one branch push, one
// pull request and one comment per task, every time.
func TestRacingPublishersOnePullRequest(t *testing.T) {
	f := newFixture(t, nil)
	f.cfg.Ledger = &github.MemoryLedger{}
	var pubs []*github.Publisher
	for range 4 {
		p, err := github.NewPublisher(f.cfg)
		if err != nil {
			t.Fatal(err)
		}
		pubs = append(pubs, p)
	}
	for i := range 20 {
		n := 100 + i
		tk := f.task("gh-acme-calc-"+itoa(n)+"-race", n)
		res := f.result(t, tk.ID)
		var wg sync.WaitGroup
		for _, p := range pubs {
			wg.Go(func() { publishUntilDone(t, p, tk, res) })
		}
		wg.Wait()
		if c := f.gh.Comments("acme", "calc", n); len(c) != 1 {
			t.Errorf("task %d: %d comments, want 1", n, len(c))
		}
	}
	if prs := len(f.gh.PullRequests("acme", "calc")); prs != 20 {
		t.Errorf("%d pull requests for 20 tasks", prs)
	}
	if pushes, created := f.gh.Pushes(), f.gh.CommentsCreated(); pushes != 20 || created != 20 {
		t.Errorf("%d pushes and %d comments created for 20 tasks: duplicates were made", pushes, created)
	}
}

// TestLateCommentUndone: a holder whose comment request reaches GitHub
// after its claim expired (a worker paused, or a slow network, between its
// last check and its request) and after another holder commented deletes
// its own duplicate, and the issue ends with one comment.
func TestLateCommentUndone(t *testing.T) {
	f := newFixture(t, nil)
	ledger := &github.MemoryLedger{TTL: 200 * time.Millisecond}
	f.cfg.Ledger = ledger
	slow, err := github.NewPublisher(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	fast, _ := github.NewPublisher(f.cfg)
	tk := f.task("gh-acme-calc-50-late", 50)
	res := f.result(t, tk.ID)
	res.Status = task.StateUnresolved
	f.gh.Inject(githubtest.Fault{Method: http.MethodPost, Path: "/repos/acme/calc/issues/50/comments", Delay: 600 * time.Millisecond})
	done := make(chan error, 1)
	go func() { _, err := slow.Publish(context.Background(), tk, res); done <- err }()
	time.Sleep(300 * time.Millisecond) // slow's request is in flight; its claim expired
	if _, err := fast.Publish(context.Background(), tk, res); err != nil {
		t.Fatalf("second holder: %v", err)
	}
	if err := <-done; !errors.Is(err, github.ErrFenced) {
		t.Errorf("late holder: %v, want ErrFenced", err)
	}
	if cs := f.gh.Comments("acme", "calc", 50); len(cs) != 1 {
		t.Errorf("%d comments, want 1", len(cs))
	}
	if created, deleted := f.gh.CommentsCreated(), f.gh.CommentsDeleted(); created != 2 || deleted != 1 {
		t.Errorf("created %d, deleted %d: want the late duplicate made and undone", created, deleted)
	}
	if rec := ledger.Effects(tk.ID)["comment.result"]; rec.State != github.EffectDone {
		t.Errorf("ledger %+v", ledger.Effects(tk.ID))
	}
}
