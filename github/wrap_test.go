package github_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/wrenchworks/wrench/github"
	"github.com/wrenchworks/wrench/github/githubtest"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

func TestWrap(t *testing.T) {
	cases := []struct {
		name      string
		mutate    func(*task.Task, *task.Report)
		cancelled bool
		wantPR    bool
		wantEvent string // "" means no event
		comments  int
	}{
		{"resolved", nil, false, true, "github: pull request ", 1},
		{"resolved work survives cancellation", nil, true, true, "github: pull request ", 1},
		{"cancelled or shutting down: not final yet", func(_ *task.Task, r *task.Report) { r.Result.Status = task.StateCancelled }, true, false, "", 0},
		{"unresolved comments", func(_ *task.Task, r *task.Report) { r.Result.Status = task.StateUnresolved }, false, false, "github: commented on", 1},
		{"retry is not final", func(_ *task.Task, r *task.Report) { r.Retry = true; r.Result.Status = task.StateFailed }, false, false, "", 0},
		{"api task untouched", func(tk *task.Task, _ *task.Report) { tk.Source = task.Source{Kind: "api"} }, false, false, "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, nil)
			tk := f.task("gh-acme-calc-30-x", 30)
			rep := task.Report{Result: f.result(t, tk.ID)}
			if c.mutate != nil {
				c.mutate(&tk, &rep)
			}
			inner := runnerFunc(func(context.Context, task.Task, int, func(task.Event)) task.Report { return rep })
			ctx, cancel := context.WithCancel(context.Background())
			if c.cancelled {
				cancel()
			}
			defer cancel()
			var events []task.Event
			got := f.pub.Wrap(inner).Run(ctx, tk, 1, func(ev task.Event) { events = append(events, ev) })
			if (got.Result.PullRequestURL != "") != c.wantPR {
				t.Errorf("PullRequestURL %q, want one: %v", got.Result.PullRequestURL, c.wantPR)
			}
			if got.Retry != rep.Retry || got.Result.Status != rep.Result.Status {
				t.Errorf("report changed: %+v", got)
			}
			switch {
			case c.wantEvent == "" && len(events) != 0:
				t.Errorf("events %+v, want none", events)
			case c.wantEvent != "" && (len(events) != 1 || !strings.HasPrefix(events[0].Text, c.wantEvent) || events[0].Kind != task.EventLog):
				t.Errorf("events %+v, want one log starting %q", events, c.wantEvent)
			}
			if n := len(f.gh.Comments("acme", "calc", 30)); n != c.comments {
				t.Errorf("%d comments, want %d", n, c.comments)
			}
		})
	}
}

func TestWrapReportsPublishFailure(t *testing.T) {
	f := newFixture(t, nil)
	tk := f.task("gh-acme-calc-31-x", 31)
	f.gh.Inject(githubtest.Fault{Path: "/repos/acme/calc/pulls", Method: http.MethodGet, Status: http.StatusNotFound})
	rep := task.Report{Result: f.result(t, tk.ID)}
	var events []task.Event
	got := f.pub.Wrap(runnerFunc(func(context.Context, task.Task, int, func(task.Event)) task.Report { return rep })).
		Run(context.Background(), tk, 1, func(ev task.Event) { events = append(events, ev) })
	if got.Result.Status != task.StateResolved || got.Result.PullRequestURL != "" {
		t.Errorf("result %+v", got.Result)
	}
	if len(events) != 1 || !events[0].IsError || !strings.Contains(events[0].Text, "github publish: ") {
		t.Errorf("events %+v", events)
	}
}

// TestWebhookToPullRequest runs the whole GitHub path with the real queue:
// a signed delivery becomes a queued task (its redelivery a duplicate),
// and that task's result becomes a pull request on the stand-in.
func TestWebhookToPullRequest(t *testing.T) {
	f := newFixture(t, nil)
	emb, err := queue.StartEmbedded(context.Background(), queue.EmbeddedConfig{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	conn, err := queue.Connect(context.Background(), queue.Config{ConnectOptions: []nats.Option{emb.ConnectOption()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)

	mux := http.NewServeMux()
	if _, err := github.Mount(mux, github.WebhookConfig{Secret: secret, Submit: conn.Submit, WebURL: f.gh.URL()}); err != nil {
		t.Fatal(err)
	}
	issue := githubtest.Issue{Number: 40, Title: "Add subtracts instead of adding", Body: "Add(2, 2) returns 0."}
	body := githubtest.IssueComment(f.repo, issue, "created", owner, "/wrench fix it")
	first := deliver(t, mux, "issue_comment", "b1f2-delivery", body)
	again := deliver(t, mux, "issue_comment", "b1f2-delivery", body)
	if first.Code != http.StatusCreated || again.Status != "duplicate" || again.TaskID != first.TaskID {
		t.Fatalf("delivery %+v, redelivery %+v", first, again)
	}
	st, err := conn.Status(context.Background(), first.TaskID)
	if err != nil || st.Task == nil {
		t.Fatalf("status: %+v, %v", st, err)
	}

	res := f.result(t, st.TaskID)
	r, err := f.pub.OnFinal(context.Background(), *st.Task, res)
	if err != nil {
		t.Fatal(err)
	}
	prs := f.gh.PullRequests("acme", "calc")
	if len(prs) != 1 || prs[0].HTMLURL != r.PullRequestURL || prs[0].Title != issue.Title ||
		prs[0].Head.Ref != "wrench/"+st.TaskID || prs[0].Base.Ref != "main" {
		t.Fatalf("pull requests %+v, result URL %q", prs, r.PullRequestURL)
	}
}
