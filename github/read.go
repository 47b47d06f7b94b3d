package github

import (
	"context"
	"net/http"
	"strconv"
)

// Issue is an issue as the REST API returns it (the fields Wrench reads).
type Issue struct {
	Number  int    `json:"number"`
	Title   string `json:"title"`
	Body    string `json:"body"`
	State   string `json:"state"`
	HTMLURL string `json:"html_url"`
}

// GetIssue returns issue number of owner/repo
// (GET /repos/{owner}/{repo}/issues/{number}).
func (c *Client) GetIssue(ctx context.Context, owner, repo string, number int) (Issue, error) {
	var out Issue
	_, err := c.repoDo(ctx, owner, repo, http.MethodGet, repoPath(owner, repo, "issues", strconv.Itoa(number)), nil, nil, &out)
	return out, err
}

// GetPullRequest returns pull request number of owner/repo
// (GET /repos/{owner}/{repo}/pulls/{number}).
func (c *Client) GetPullRequest(ctx context.Context, owner, repo string, number int) (PullRequest, error) {
	var out PullRequest
	_, err := c.repoDo(ctx, owner, repo, http.MethodGet, repoPath(owner, repo, "pulls", strconv.Itoa(number)), nil, nil, &out)
	return out, err
}
