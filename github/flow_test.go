package github_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/wrenchworks/wrench/github"
	"github.com/wrenchworks/wrench/github/githubtest"
	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/queue/natsserver"
	"github.com/wrenchworks/wrench/task"
)

// TestWebhookToPullRequest runs the GitHub path with the real queue: a
// signed delivery becomes a queued task (its redelivery a duplicate),
// and once that task's result is stored, finalizing it opens the pull
// request on the stand-in.
func TestWebhookToPullRequest(t *testing.T) {
	f := newFixture(t, nil)
	conn := natstest.Connect(t, natstest.Start(t, natsserver.Config{}))

	mux := http.NewServeMux()
	if _, err := github.Mount(mux, github.WebhookConfig{Secret: secret, Submit: conn.Submissions().Submit, WebURL: f.gh.URL()}); err != nil {
		t.Fatal(err)
	}
	issue := githubtest.Issue{Number: 40, Title: "Add subtracts instead of adding", Body: "Add(2, 2) returns 0."}
	body := githubtest.IssueComment(f.repo, issue, "created", owner, "/wrench fix it")
	first := deliver(t, mux, "issue_comment", "b1f2-delivery", body)
	again := deliver(t, mux, "issue_comment", "b1f2-delivery", body)
	if first.Code != http.StatusCreated || again.Status != "duplicate" || again.TaskID != first.TaskID {
		t.Fatalf("delivery %+v, redelivery %+v", first, again)
	}
	ctx := context.Background()
	st, err := conn.States().Status(ctx, first.TaskID)
	if err != nil || st.Task == nil {
		t.Fatalf("status: %+v, %v", st, err)
	}
	lease, _, err := conn.States().Acquire(ctx, *st.Task, queue.Claim{Attempt: 1, Worker: "w"})
	if err != nil {
		t.Fatal(err)
	}
	if st, err = lease.Finish(ctx, f.result(t, st.TaskID)); err != nil {
		t.Fatal(err)
	}
	f.cfg.SetPullRequest = conn.States().SetPullRequest
	pub, err := github.NewPublisher(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Finalize(ctx, st); err != nil {
		t.Fatal(err)
	}
	prs := f.gh.PullRequests("acme", "calc")
	if len(prs) != 1 || prs[0].Title != issue.Title || prs[0].Head.Ref != "wrench/"+st.TaskID || prs[0].Base.Ref != "main" {
		t.Fatalf("pull requests %+v", prs)
	}
	if st, _ = conn.States().Status(ctx, st.TaskID); st.Result.PullRequestURL != prs[0].HTMLURL || st.State != task.StateResolved {
		t.Errorf("stored result: %s %q, want the pull request", st.State, st.Result.PullRequestURL)
	}
}
