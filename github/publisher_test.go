package github_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/github"
	"github.com/wrenchworks/wrench/github/githubtest"
	"github.com/wrenchworks/wrench/task"
)

func TestPublishResolved(t *testing.T) {
	f := newFixture(t, nil)
	tk := f.task("gh-acme-calc-7-abc", 7)
	res := f.result(t, tk.ID)

	prURL, err := f.pub.Publish(context.Background(), tk, res)
	if err != nil {
		t.Fatalf("Publish: %v\nlog:\n%s", err, f.log)
	}

	// A real branch exists in the stand-in's repository, one commit on
	// the base, with the patch applied.
	branch := github.BranchName(tk.ID)
	sha, ok := f.gh.Branch("acme", "calc", branch)
	if !ok {
		t.Fatalf("branch %s not pushed", branch)
	}
	if got := f.gh.File(t, "acme", "calc", branch, "calc.go"); !strings.Contains(got, "return a + b") {
		t.Errorf("calc.go on %s:\n%s", branch, got)
	}
	if parent := strings.TrimSpace(f.gh.Git(t, "acme", "calc", "rev-parse", sha+"^")); parent != f.repo.Head {
		t.Errorf("commit's parent = %s, want the base %s", parent, f.repo.Head)
	}
	msg := f.gh.Git(t, "acme", "calc", "log", "-1", "--format=%an <%ae>%n%s%n%b", sha)
	for _, want := range []string{"Wrench <wrench@users.noreply.github.com>", "Fix Add to add.", "Wrench-Task: " + tk.ID, "Issue: acme/calc#7"} {
		if !strings.Contains(msg, want) {
			t.Errorf("commit message lacks %q:\n%s", want, msg)
		}
	}

	// The pull request has the right head, base, title and body.
	prs := f.gh.PullRequests("acme", "calc")
	if len(prs) != 1 {
		t.Fatalf("%d pull requests, want 1", len(prs))
	}
	pr := prs[0]
	if pr.HTMLURL != prURL {
		t.Errorf("Publish returned %q, pull request is %q", prURL, pr.HTMLURL)
	}
	if pr.Head.Ref != branch || pr.Base.Ref != "main" || pr.Head.SHA != sha {
		t.Errorf("head %s@%s base %s, want %s@%s into main", pr.Head.Ref, pr.Head.SHA, pr.Base.Ref, branch, sha)
	}
	if pr.Title != "Add subtracts instead of adding" {
		t.Errorf("title %q", pr.Title)
	}
	for _, want := range []string{"Fix Add to add.", "### Evidence", "| Test command | `go test ./...` |",
		"| Before the change | failed (exit 1) in 1.2s |", "| After the change | passed in 900ms |",
		"| Failing tests that now pass | `TestAdd`, `TestAdd/negative` |", "| Tests that newly fail | none |",
		"| Setup | snapshot hit: setup skipped |", "| Environment snapshot | `env-3f9a` |",
		"| Turns | 4 (6 tool calls) |", "| Tokens | 12000 input, 800 output |", "| Cost | $0.0312 |", "| Time | 1m35s |",
		"| Trajectory | `" + tk.ID + "/trajectory.jsonl` in Wrench's artifact store |",
		"https://wrench.example.com/v1/tasks/" + tk.ID, "Closes #7", "<!-- wrench:task=" + tk.ID + " kind=pr -->"} {
		if !strings.Contains(pr.Body, want) {
			t.Errorf("pull request body lacks %q:\n%s", want, pr.Body)
		}
	}
	if pr.Draft || strings.Contains(pr.Body, "Not verified") || len(f.gh.Labels("acme", "calc", pr.Number)) != 0 {
		t.Errorf("a verified result opened a draft or labelled pull request: draft %v, labels %v", pr.Draft, f.gh.Labels("acme", "calc", pr.Number))
	}

	// The issue got one comment linking the pull request.
	cs := f.gh.Comments("acme", "calc", 7)
	if len(cs) != 1 || !strings.Contains(cs[0].Body, prURL) {
		t.Fatalf("comments on #7: %+v", cs)
	}

	// Every REST call carried the token and GitHub's headers.
	for _, r := range f.gh.Requests() {
		if !r.Authorized || r.Header.Get("Accept") != "application/vnd.github+json" || r.Header.Get("X-GitHub-Api-Version") == "" {
			t.Errorf("%s %s: authorized %v, headers %v", r.Method, r.Path, r.Authorized, r.Header)
		}
	}
}

func TestPublishTwiceOpensOnePullRequest(t *testing.T) {
	for _, cache := range []bool{false, true} {
		name := "temporary repository"
		if cache {
			name = "cache dir"
		}
		t.Run(name, func(t *testing.T) {
			var dir string
			if cache {
				dir = t.TempDir()
			}
			f := newFixture(t, func(c *github.PublisherConfig) { c.CacheDir = dir })
			tk := f.task("gh-acme-calc-8-def", 8)
			res := f.result(t, tk.ID)
			first, err := f.pub.Publish(context.Background(), tk, res)
			if err != nil {
				t.Fatal(err)
			}
			second, err := f.pub.Publish(context.Background(), tk, res)
			if err != nil {
				t.Fatal(err)
			}
			if first != second {
				t.Errorf("second publish returned %q, first %q", second, first)
			}
			if n := len(f.gh.PullRequests("acme", "calc")); n != 1 {
				t.Errorf("%d pull requests, want 1", n)
			}
			if n := len(f.gh.Comments("acme", "calc", 8)); n != 1 {
				t.Errorf("%d comments, want 1", n)
			}
			if n := f.gh.Pushes(); n != 1 {
				t.Errorf("%d pushes, want 1", n)
			}
			// A publisher whose ledger lost its records (another process
			// without the shared ledger) finds what GitHub has.
			other, err := github.NewPublisher(f.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if third, err := other.Publish(context.Background(), tk, res); err != nil || third != first {
				t.Fatalf("publish with an empty ledger: %q, %v", third, err)
			}
			if np, nc := len(f.gh.PullRequests("acme", "calc")), f.gh.CommentsCreated(); np != 1 || nc != 1 {
				t.Errorf("%d pull requests, %d comments created, want 1 and 1", np, nc)
			}
		})
	}
}

func TestPublishReusesClosedPullRequest(t *testing.T) {
	f := newFixture(t, nil)
	tk := f.task("gh-acme-calc-9-aaa", 9)
	res := f.result(t, tk.ID)
	first, err := f.pub.Publish(context.Background(), tk, res)
	if err != nil {
		t.Fatal(err)
	}
	f.gh.ClosePullRequest("acme", "calc", f.gh.PullRequests("acme", "calc")[0].Number)
	second, err := f.pub.Publish(context.Background(), tk, res)
	if err != nil || second != first {
		t.Fatalf("second publish: %q, %v; want %q", second, err, first)
	}
	if n := len(f.gh.PullRequests("acme", "calc")); n != 1 {
		t.Errorf("%d pull requests after a maintainer closed the first, want 1", n)
	}
}

func TestPublishOnMovedBase(t *testing.T) {
	// The base branch moved on while the task ran: the commit still goes
	// on the result's base commit, which the publisher fetches from the
	// history. With a cache dir, the second task reuses the repository.
	dir := t.TempDir()
	f := newFixture(t, func(c *github.PublisherConfig) { c.CacheDir = dir })
	res1 := f.result(t, "t1")
	newer := f.gh.Commit(t, "acme", "calc", "main", map[string]string{"NOTES.md": "notes\n"}, "notes")
	for i, id := range []string{"gh-acme-calc-10-a", "gh-acme-calc-11-b"} {
		tk := f.task(id, 10+i)
		r := res1
		r.TaskID = id
		if _, err := f.pub.Publish(context.Background(), tk, r); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		sha, _ := f.gh.Branch("acme", "calc", github.BranchName(id))
		if parent := strings.TrimSpace(f.gh.Git(t, "acme", "calc", "rev-parse", sha+"^")); parent != f.repo.Head {
			t.Errorf("%s: parent %s, want the old base %s (main is at %s)", id, parent, f.repo.Head, newer)
		}
	}
}

func TestPublishWithoutPullRequest(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*task.Task, *task.Result)
		want   []string // in the comment
		patch  bool     // the comment carries the patch
	}{
		{"unresolved", func(_ *task.Task, r *task.Result) {
			r.Status, r.Reason, r.TestsAfter.Passed, r.TestsAfter.ExitCode = task.StateUnresolved, "finished_unverified", false, 1
		}, []string{"Wrench did not solve this: the tests still fail with its change.", "reason: finished_unverified",
			"| after | `go test ./...` | failed (exit 1)", "Work so far"}, true},
		{"out of turns", func(_ *task.Task, r *task.Result) { r.Status, r.Reason = task.StateUnresolved, "max_turns" },
			[]string{"it used all its turns"}, true},
		{"failed", func(_ *task.Task, r *task.Result) {
			r.Status, r.Reason, r.Patch, r.Summary, r.Fault = task.StateFailed, "clone: connection refused", "", "", task.FaultInfra
		}, []string{"a problem on its side", "clone: connection refused", "No changes were made."}, false},
		{"dead-lettered", func(_ *task.Task, r *task.Result) {
			r.Status, r.Reason, r.Patch = task.StateFailed, "deliveries exhausted (5): worker died", ""
		}, []string{"Wrench gave up", "deliveries exhausted (5): worker died"}, false},
		{"setup failed", func(_ *task.Task, r *task.Result) {
			r.Status, r.Reason, r.Fault = task.StateFailed, "setup_failed: exit 2", task.FaultSetup
		}, []string{"its setup failed"}, true},
		{"timed out", func(tk *task.Task, r *task.Result) {
			r.Status, r.Reason, tk.Limits.Timeout = task.StateTimedOut, "timeout", task.Duration(30*time.Minute)
		}, []string{"Wrench ran out of time (30m0s)"}, true},
		{"cancelled", func(_ *task.Task, r *task.Result) { r.Status, r.Reason = task.StateCancelled, "cancelled" },
			[]string{"the task was cancelled", "Work so far"}, true},
		{"resolved without changes", func(_ *task.Task, r *task.Result) { r.Patch = "" },
			[]string{"found nothing to change"}, false},
		{"resolved with failing tests", func(_ *task.Task, r *task.Result) { r.TestsAfter.Passed, r.TestsAfter.ExitCode = false, 1 },
			[]string{"the tests fail with it"}, true},
		{"resolved, no pull request asked", func(tk *task.Task, _ *task.Result) { tk.Output.PullRequest = nil },
			[]string{"did not ask for a pull request"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, nil)
			tk := f.task("gh-acme-calc-3-x", 3)
			res := f.result(t, tk.ID)
			c.mutate(&tk, &res)
			u, err := f.pub.Publish(context.Background(), tk, res)
			if err != nil || u != "" {
				t.Fatalf("Publish = %q, %v; want no pull request and no error", u, err)
			}
			if f.gh.Pushes() != 0 || len(f.gh.PullRequests("acme", "calc")) != 0 {
				t.Errorf("pushed %d times, %d pull requests; want none", f.gh.Pushes(), len(f.gh.PullRequests("acme", "calc")))
			}
			if _, ok := f.gh.Branch("acme", "calc", github.BranchName(tk.ID)); ok {
				t.Error("branch was pushed")
			}
			cs := f.gh.Comments("acme", "calc", 3)
			if len(cs) != 1 {
				t.Fatalf("%d comments, want 1", len(cs))
			}
			for _, w := range c.want {
				if !strings.Contains(cs[0].Body, w) {
					t.Errorf("comment lacks %q:\n%s", w, cs[0].Body)
				}
			}
			if has := strings.Contains(cs[0].Body, "```diff\n"); has != c.patch {
				t.Errorf("comment has patch = %v, want %v:\n%s", has, c.patch, cs[0].Body)
			}
			// Publishing again writes no second comment.
			if _, err := f.pub.Publish(context.Background(), tk, res); err != nil {
				t.Fatal(err)
			}
			if n := len(f.gh.Comments("acme", "calc", 3)); n != 1 {
				t.Errorf("%d comments after a second publish, want 1", n)
			}
		})
	}
}

func TestPublishTruncatesLongPatch(t *testing.T) {
	f := newFixture(t, nil)
	tk := f.task("gh-acme-calc-4-x", 4)
	res := f.result(t, tk.ID)
	res.Status = task.StateUnresolved
	res.Patch = makePatch(t, f.repo, map[string]string{"big.txt": strings.Repeat("a line with a ``` fence\n", 8000)})
	if _, err := f.pub.Publish(context.Background(), tk, res); err != nil {
		t.Fatal(err)
	}
	body := f.gh.Comments("acme", "calc", 4)[0].Body
	if n := len([]rune(body)); n > 65536 {
		t.Errorf("comment is %d characters, over GitHub's limit", n)
	}
	if !strings.Contains(body, "bytes of") || !strings.Contains(body, "````diff\n") {
		t.Errorf("comment does not say it was cut or does not fence the patch safely:\n%s", body[:300])
	}
}

func TestPublishPatchDoesNotApply(t *testing.T) {
	f := newFixture(t, nil)
	tk := f.task("gh-acme-calc-5-x", 5)
	res := f.result(t, tk.ID)
	res.Patch = strings.Replace(res.Patch, "return a - b", "return a * b", 1)
	_, err := f.pub.Publish(context.Background(), tk, res)
	if !errors.Is(err, github.ErrPatchDoesNotApply) {
		t.Fatalf("err = %v, want ErrPatchDoesNotApply", err)
	}
	if len(f.gh.PullRequests("acme", "calc")) != 0 || f.gh.Pushes() != 0 {
		t.Error("a pull request or push was made for a patch that does not apply")
	}
	cs := f.gh.Comments("acme", "calc", 5)
	if len(cs) != 1 || !strings.Contains(cs[0].Body, "could not open a pull request") || !errors.Is(err, github.ErrReported) ||
		!strings.Contains(cs[0].Body, "```diff") || !strings.Contains(cs[0].Body, "kind=failed") {
		t.Fatalf("comments: %+v", cs)
	}
}

func TestPublishRefusesForeignTasks(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*task.Task)
	}{
		{"api task", func(tk *task.Task) { tk.Source = task.Source{Kind: "api"} }},
		{"bad issue", func(tk *task.Task) { tk.Source.Issue = "acme/calc" }},
		{"repo not the issue's", func(tk *task.Task) { tk.Source.Issue = "victim/other#1" }},
		{"local repository", func(tk *task.Task) { tk.Repo.URL = "/srv/git/calc" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, nil)
			tk := f.task("t-1", 1)
			c.mutate(&tk)
			_, err := f.pub.Publish(context.Background(), tk, f.result(t, tk.ID))
			if !errors.Is(err, github.ErrNotGitHubTask) {
				t.Fatalf("err = %v, want ErrNotGitHubTask", err)
			}
			if n := len(f.gh.Requests()); n != 0 {
				t.Errorf("%d REST calls for a refused task", n)
			}
		})
	}
}

// TestPublishUntested: a result that passed only because there was no
// test command opens a labelled pull request, a draft by default, and
// not a draft where the policy says so.
func TestPublishUntested(t *testing.T) {
	for _, draft := range []bool{true, false} {
		t.Run(fmt.Sprintf("draft %v", draft), func(t *testing.T) {
			f := newFixture(t, func(c *github.PublisherConfig) {
				if !draft {
					c.DraftWithoutTests = func(string) bool { return false }
				}
			})
			tk := f.task("gh-acme-calc-12-x", 12)
			res := f.result(t, tk.ID)
			res.TestsBefore, res.TestsAfter = nil, nil
			u, err := f.pub.Publish(context.Background(), tk, res)
			if err != nil || u == "" {
				t.Fatalf("Publish = %q, %v", u, err)
			}
			pr := f.gh.PullRequests("acme", "calc")[0]
			if pr.Draft != draft {
				t.Errorf("draft = %v, want %v", pr.Draft, draft)
			}
			if l := f.gh.Labels("acme", "calc", pr.Number); len(l) != 1 || l[0] != github.DefaultUntestedLabel {
				t.Errorf("labels %v", l)
			}
			for _, want := range []string{"Not verified by tests", "| Test command | **none**: nothing checked the change |"} {
				if !strings.Contains(pr.Body, want) {
					t.Errorf("body lacks %q:\n%s", want, pr.Body)
				}
			}
			if cs := f.gh.Comments("acme", "calc", 12); len(cs) != 1 || !strings.Contains(cs[0].Body, "labelled as untested") {
				t.Errorf("comments %+v", cs)
			}
		})
	}
}

// TestFinalize: the dispatcher's hook publishes GitHub tasks' stored
// results, records the pull request on the result, leaves other tasks
// alone, and does not call a failure it reported on the issue an error.
func TestFinalize(t *testing.T) {
	var recorded []string
	f := newFixture(t, func(c *github.PublisherConfig) {
		c.SetPullRequest = func(_ context.Context, id, u string) error {
			recorded = append(recorded, id+" "+u)
			return nil
		}
	})
	api := f.task("t-api", 1)
	api.Source = task.Source{Kind: "api"}
	res := f.result(t, api.ID)
	if err := f.pub.Finalize(context.Background(), task.Status{TaskID: api.ID, Task: &api, State: res.Status, Result: &res}); err != nil || len(f.gh.Requests()) != 0 {
		t.Fatalf("non-GitHub task: %v, %d calls; want a no-op", err, len(f.gh.Requests()))
	}
	gh := f.task("gh-acme-calc-2-x", 2)
	res = f.result(t, gh.ID)
	if err := f.pub.Finalize(context.Background(), task.Status{TaskID: gh.ID, Task: &gh, State: res.Status, Result: &res}); err != nil {
		t.Fatal(err)
	}
	if prs := f.gh.PullRequests("acme", "calc"); len(prs) != 1 || len(recorded) != 1 || recorded[0] != gh.ID+" "+prs[0].HTMLURL {
		t.Fatalf("pull requests %d, recorded %v", len(prs), recorded)
	}
	bad := f.task("gh-acme-calc-3-x", 3)
	res = f.result(t, bad.ID)
	res.Patch = strings.Replace(res.Patch, "return a - b", "return a * b", 1)
	if err := f.pub.Finalize(context.Background(), task.Status{TaskID: bad.ID, Task: &bad, State: res.Status, Result: &res}); err != nil {
		t.Errorf("a failure reported on the issue is an error to the dispatcher: %v", err)
	}
	f.gh.Inject(githubtest.Fault{Path: "/repos/acme/calc/issues/4/comments", Status: http.StatusBadGateway, Times: 10})
	down := f.task("gh-acme-calc-4-x", 4)
	res = f.result(t, down.ID)
	res.Status = task.StateUnresolved
	if err := f.pub.Finalize(context.Background(), task.Status{TaskID: down.ID, Task: &down, State: res.Status, Result: &res}); err == nil {
		t.Error("GitHub down: no error, so the dispatcher would not try again")
	}
}

func TestPublishReplacesStaleBranch(t *testing.T) {
	// An earlier attempt pushed the branch and died before the pull
	// request: the branch is ours (wrench/<task id>), so it is replaced.
	f := newFixture(t, nil)
	tk := f.task("gh-acme-calc-6-x", 6)
	f.gh.Commit(t, "acme", "calc", github.BranchName(tk.ID), map[string]string{"junk.txt": "junk\n"}, "stale")
	if _, err := f.pub.Publish(context.Background(), tk, f.result(t, tk.ID)); err != nil {
		t.Fatal(err)
	}
	sha, _ := f.gh.Branch("acme", "calc", github.BranchName(tk.ID))
	if parent := strings.TrimSpace(f.gh.Git(t, "acme", "calc", "rev-parse", sha+"^")); parent != f.repo.Head {
		t.Errorf("branch's parent %s, want the base %s", parent, f.repo.Head)
	}
	if prs := f.gh.PullRequests("acme", "calc"); len(prs) != 1 || prs[0].Head.SHA != sha {
		t.Errorf("pull requests %+v", prs)
	}
}
