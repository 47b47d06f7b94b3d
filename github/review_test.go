package github_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/github"
	"github.com/wrenchworks/wrench/github/githubtest"
	"github.com/wrenchworks/wrench/policy"
	"github.com/wrenchworks/wrench/task"
)

// reviewFixture is the publisher fixture with a pull request Wrench opened
// and a webhook that can read GitHub.
type reviewFixture struct {
	*fixture
	q    *fakeQueue
	hook http.Handler
	pr   githubtest.PullRequest
	tk   task.Task
}

func newReviewFixture(t *testing.T, mod func(*github.WebhookConfig)) *reviewFixture {
	t.Helper()
	f := newFixture(t, nil)
	tk := f.task("gh-acme-calc-7-0123456789ab", 7)
	if _, err := f.pub.Publish(context.Background(), tk, f.result(t, tk.ID)); err != nil {
		t.Fatal(err)
	}
	q := &fakeQueue{}
	hook := newHook(t, q, func(c *github.WebhookConfig) {
		c.WebURL, c.API = f.gh.URL(), f.pub.Client()
		if mod != nil {
			mod(c)
		}
	})
	f.gh.SetPermission("acme", "calc", "alice", "write")
	f.gh.SetPermission("acme", "calc", "rita", "read")
	return &reviewFixture{fixture: f, q: q, hook: hook, pr: f.gh.PullRequests("acme", "calc")[0], tk: tk}
}

const hunk = "@@ -1,5 +1,5 @@\n package calc\n \n func Add(a, b int) int {\n-\treturn a - b\n+\treturn a + b"

// TestFollowUpFromReviewComment: `/wrench …` answering a review thread on
// a Wrench pull request starts a task on its branch with the thread and
// the hunk; its result becomes a second commit on the same pull request
// and the thread is answered, once.
func TestFollowUpFromReviewComment(t *testing.T) {
	f := newReviewFixture(t, nil)
	first := f.gh.AddReviewComment("acme", "calc", f.pr.Number, "bob", "calc.go", 4, hunk, "What about an empty input?", 0)
	ask := f.gh.AddReviewComment("acme", "calc", f.pr.Number, "alice", "calc.go", 4, hunk, "/wrench also handle the empty input", first.ID)
	r := deliver(t, f.hook, "pull_request_review_comment", "d-r1", githubtest.PullRequestReviewComment(f.repo, f.pr, ask))
	if r.Code != http.StatusCreated {
		t.Fatalf("answer %+v", r)
	}
	if again := deliver(t, f.hook, "pull_request_review_comment", "d-r1-again", githubtest.PullRequestReviewComment(f.repo, f.pr, ask)); again.Status != "duplicate" {
		t.Errorf("redelivery: %+v", again)
	}
	sub := f.q.submitted()
	if len(sub) != 1 {
		t.Fatalf("%d tasks", len(sub))
	}
	fu := sub[0]
	branch := github.BranchName(f.tk.ID)
	head, _ := f.gh.Branch("acme", "calc", branch)
	if fu.Repo.Ref != branch || fu.Repo.Commit != head || fu.Output.PullRequest.Number != f.pr.Number ||
		fu.Output.PullRequest.Branch != branch || fu.Source.ReviewComment != ask.ID || fu.Source.Issue != "acme/calc#"+itoa(f.pr.Number) {
		t.Fatalf("task %+v %+v %+v", fu.Repo, *fu.Output.PullRequest, fu.Source)
	}
	for _, want := range []string{"Follow-up on pull request #" + itoa(f.pr.Number), "@alice in a review comment on calc.go line 4",
		"also handle the empty input", "@bob: What about an empty input?", "```diff\n" + hunk} {
		if !strings.Contains(fu.Instruction, want) {
			t.Errorf("instruction lacks %q:\n%s", want, fu.Instruction)
		}
	}

	res := f.result(t, fu.ID)
	res.BaseCommit = head
	res.Summary = "Handle the empty input"
	res.Patch = makePatchAt(t, f.repo, branch, map[string]string{"calc.go": strings.Replace(calcGo, "a - b", "a + b", 1) + "\n// Empty input adds nothing.\n"})
	for range 2 {
		if u, err := f.pub.Publish(context.Background(), fu, res); err != nil || u != f.pr.HTMLURL {
			t.Fatalf("publish follow-up: %q, %v", u, err)
		}
	}
	now, _ := f.gh.Branch("acme", "calc", branch)
	if parent := strings.TrimSpace(f.gh.Git(t, "acme", "calc", "rev-parse", now+"^")); parent != head {
		t.Errorf("new commit's parent %s, want the pull request's head %s", parent, head)
	}
	if n := len(f.gh.PullRequests("acme", "calc")); n != 1 {
		t.Errorf("%d pull requests, want the same one", n)
	}
	var replies []githubtest.ReviewComment
	for _, c := range f.gh.ReviewComments("acme", "calc", f.pr.Number) {
		if c.User.Login == "wrench[bot]" {
			replies = append(replies, c)
		}
	}
	if len(replies) != 1 || replies[0].InReplyToID != first.ID || !strings.Contains(replies[0].Body, "Done: Wrench pushed "+now[:12]) {
		t.Fatalf("replies %+v", replies)
	}
}

// TestFollowUpRefused: only people with write access, on Wrench's own
// open pull requests, with the command, start follow-ups.
func TestFollowUpRefused(t *testing.T) {
	f := newReviewFixture(t, nil)
	other := f.pr
	other.Head.Ref = "feature"
	cases := []struct {
		name string
		pr   githubtest.PullRequest
		user string
		body string
		want string
	}{
		{"reader", f.pr, "rita", "/wrench do it", "read access"},
		{"stranger", f.pr, "mallory", "/wrench do it", "none access"},
		{"not a Wrench pull request", other, "alice", "/wrench do it", "not one Wrench opened"},
		{"no command", f.pr, "alice", "looks good", "does not start with"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cm := f.gh.AddReviewComment("acme", "calc", f.pr.Number, c.user, "calc.go", 4, hunk, c.body, 0)
			r := deliver(t, f.hook, "pull_request_review_comment", "d-"+c.name, githubtest.PullRequestReviewComment(f.repo, c.pr, cm))
			if r.Code != http.StatusAccepted || !strings.Contains(r.Reason, c.want) {
				t.Errorf("answer %+v, want ignored: %s", r, c.want)
			}
		})
	}
	if n := len(f.q.submitted()); n != 0 {
		t.Errorf("%d tasks", n)
	}
}

// TestFollowUpFromConversation: `/wrench …` on the pull request's
// conversation reads the pull request, starts a follow-up, and answers
// on the conversation; permissions are read once per minute per user.
func TestFollowUpFromConversation(t *testing.T) {
	f := newReviewFixture(t, nil)
	pr := githubtest.Issue{Number: f.pr.Number, Title: f.pr.Title, PullRequest: true}
	alice := githubtest.Actor{Login: "alice", Association: "CONTRIBUTOR"}
	for i, body := range []string{"/wrench rename Add to Sum", "/wrench and document it"} {
		r := deliver(t, f.hook, "issue_comment", "d-c"+itoa(i), githubtest.IssueCommentWithID(f.repo, pr, int64(900+i), "created", alice, body))
		if r.Code != http.StatusCreated {
			t.Fatalf("answer %+v", r)
		}
	}
	calls := 0
	for _, r := range f.gh.Requests() {
		if strings.Contains(r.Path, "/collaborators/") {
			calls++
		}
	}
	if calls != 1 {
		t.Errorf("%d permission look-ups for two comments, want 1 (cached)", calls)
	}
	fu := f.q.submitted()[0]
	if fu.Source.ReviewComment != 0 || fu.Output.PullRequest.Number != f.pr.Number || !strings.Contains(fu.Instruction, "@alice in a comment on the pull request") {
		t.Fatalf("task %+v %+v:\n%s", fu.Source, fu.Output.PullRequest, fu.Instruction)
	}
	res := f.result(t, fu.ID)
	res.Status, res.Reason = task.StateUnresolved, "max_turns"
	if _, err := f.pub.Publish(context.Background(), fu, res); err != nil {
		t.Fatal(err)
	}
	cs := f.gh.Comments("acme", "calc", f.pr.Number)
	if len(cs) != 1 || !strings.Contains(cs[0].Body, "used all its turns") || !strings.Contains(cs[0].Body, "kind=reply") {
		t.Errorf("conversation comments %+v", cs)
	}
}

// TestWebhookPolicyRefusal: a repository the policy refuses gets no task
// and a comment, once, saying how to allow it.
func TestWebhookPolicyRefusal(t *testing.T) {
	pol, err := policy.Parse([]byte("repositories:\n  - match: \"*/acme/calc*\"\n    allow: false\n    reason: calc is frozen\n"), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := newReviewFixture(t, func(c *github.WebhookConfig) { c.Policy = pol })
	issue := githubtest.Issue{Number: 30, Title: "Fix it"}
	for range 2 {
		r := deliver(t, f.hook, "issues", "d-p", githubtest.IssueLabeled(f.repo, issue, "wrench", owner))
		if r.Code != http.StatusAccepted || !strings.Contains(r.Reason, "calc is frozen") {
			t.Fatalf("answer %+v", r)
		}
	}
	cs := f.gh.Comments("acme", "calc", 30)
	if len(cs) != 1 || !strings.Contains(cs[0].Body, "calc is frozen") || !strings.Contains(cs[0].Body, "allow: true") {
		t.Fatalf("comments %+v", cs)
	}
	if n := len(f.q.submitted()); n != 0 {
		t.Errorf("%d tasks", n)
	}
}
