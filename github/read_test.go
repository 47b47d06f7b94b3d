package github

import (
	"context"
	"errors"
	"testing"

	"github.com/wrenchworks/wrench/github/githubtest"
)

func TestGetIssueAndPullRequest(t *testing.T) {
	gh := githubtest.New(t, "tok-123456")
	gh.AddRepo(t, "acme", "calc", map[string]string{"a.txt": "a\n"})
	issue := gh.AddIssue("acme", "calc", "Add subtracts", "2+3 gives -1")
	pr := gh.AddMergedPullRequest("acme", "calc", "Fix Add", "Fixes #7 and closes nothing")
	c, err := NewClient(ClientConfig{BaseURL: gh.APIURL(), Token: "tok-123456", HTTPClient: gh.Client()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	is, err := c.GetIssue(ctx, "acme", "calc", issue)
	if err != nil || is.Number != issue || is.Title != "Add subtracts" || is.Body != "2+3 gives -1" {
		t.Errorf("GetIssue = %+v, %v", is, err)
	}
	p, err := c.GetPullRequest(ctx, "acme", "calc", pr)
	if err != nil || p.Number != pr || p.Body != "Fixes #7 and closes nothing" || p.State != "closed" {
		t.Errorf("GetPullRequest = %+v, %v", p, err)
	}
	if pr == issue {
		t.Error("an issue and a pull request share a number")
	}
	if _, err := c.GetIssue(ctx, "acme", "calc", 9999); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing issue: %v", err)
	}
}
