package github

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultAPIURL is GitHub's REST API.
const DefaultAPIURL = "https://api.github.com"

// apiVersion is the REST API version the client asks for.
const apiVersion = "2022-11-28"

// maxResponse caps a REST response body.
const maxResponse = 8 << 20

// ClientConfig configures a [Client].
type ClientConfig struct {
	// BaseURL is the REST API root: DefaultAPIURL when empty, or e.g.
	// "https://ghe.example.com/api/v3" for GitHub Enterprise Server.
	BaseURL string
	// Token is sent as "Authorization: Bearer <token>": a fine-grained
	// personal access token or an installation token. It never appears in
	// an error or log line. Ignored when Tokens is set.
	Token string
	// Tokens gives the token per repository (an [*App]); a token GitHub
	// answers 401 to is dropped from it and the call retried once with a
	// new one.
	Tokens TokenSource
	// HTTPClient sends the requests (http.DefaultClient when nil); give one
	// with a per-request Timeout.
	HTTPClient *http.Client
	// UserAgent is sent with every request ("wrench" when empty).
	UserAgent string
	// MaxRetries is how many times a request is retried after a 5xx, a
	// rate limit or (for GETs) a network error: 3 when zero, none when
	// negative.
	MaxRetries int
	// MaxRetryWait is the longest single wait the client accepts (60s
	// when zero): a rate limit asking for more is returned at once as an
	// [*APIError] matching [ErrRateLimited].
	MaxRetryWait time.Duration
}

// Client is a small GitHub REST client: the calls Wrench's publisher makes.
// It is safe for concurrent use.
type Client struct {
	base  *url.URL
	cfg   ClientConfig
	hc    *http.Client
	sleep func(ctx context.Context, d time.Duration) error
}

// NewClient checks cfg and returns a Client.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultAPIURL
	}
	u, err := url.Parse(strings.TrimSuffix(cfg.BaseURL, "/"))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("github: API URL %q: want http(s)://host[/path] without credentials", cfg.BaseURL)
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "wrench"
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 3
	}
	if cfg.MaxRetryWait <= 0 {
		cfg.MaxRetryWait = time.Minute
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	if cfg.Tokens == nil && cfg.Token != "" {
		cfg.Tokens = StaticToken(cfg.Token)
	}
	return &Client{base: u, cfg: cfg, hc: hc, sleep: sleepCtx}, nil
}

// Tokens returns the client's token source (nil when it has none).
func (c *Client) Tokens() TokenSource { return c.cfg.Tokens }

// repoDo sends a call on owner/repo with the repository's token. A 401
// with a token from a source that can forget it is retried once with a
// fresh token (an installation token revoked or expired early).
func (c *Client) repoDo(ctx context.Context, owner, repo, method, path string, q url.Values, in, out any) (http.Header, error) {
	if c.cfg.Tokens == nil {
		return c.do(ctx, "", method, path, q, in, out)
	}
	for attempt := 0; ; attempt++ {
		tok, err := c.cfg.Tokens.Token(ctx, owner, repo)
		if err != nil {
			return nil, err
		}
		h, err := c.do(ctx, tok.Value, method, path, q, in, out)
		f, ok := c.cfg.Tokens.(forgetter)
		if attempt == 0 && ok && errors.Is(err, ErrUnauthorized) {
			f.Forget(owner, repo, tok.Value)
			continue
		}
		return h, err
	}
}

// NewPullRequest is the body of "create a pull request".
type NewPullRequest struct {
	Title string `json:"title"`
	// Head is the branch with the changes ("branch", or "owner:branch").
	Head string `json:"head"`
	// Base is the branch to merge into.
	Base                string `json:"base"`
	Body                string `json:"body,omitempty"`
	Draft               bool   `json:"draft,omitempty"`
	MaintainerCanModify *bool  `json:"maintainer_can_modify,omitempty"`
}

// PullRequest is a pull request as the API returns it (the fields Wrench
// uses).
type PullRequest struct {
	Number  int    `json:"number"`
	State   string `json:"state"`
	Title   string `json:"title"`
	Body    string `json:"body"`
	HTMLURL string `json:"html_url"`
	Draft   bool   `json:"draft"`
	Head    Branch `json:"head"`
	Base    Branch `json:"base"`
}

// Branch is a pull request's head or base.
type Branch struct {
	Label string `json:"label"`
	Ref   string `json:"ref"`
	SHA   string `json:"sha"`
}

// IssueComment is a comment on an issue or pull request conversation.
type IssueComment struct {
	ID      int64  `json:"id"`
	Body    string `json:"body"`
	HTMLURL string `json:"html_url"`
	User    User   `json:"user"`
}

// User is a GitHub account.
type User struct {
	Login string `json:"login"`
	Type  string `json:"type"`
}

// CreatePullRequest opens a pull request on owner/repo
// (POST /repos/{owner}/{repo}/pulls). A second pull request for the same
// head and base is refused by GitHub with a 422 ([ErrValidation]).
func (c *Client) CreatePullRequest(ctx context.Context, owner, repo string, pr NewPullRequest) (PullRequest, error) {
	var out PullRequest
	_, err := c.repoDo(ctx, owner, repo, http.MethodPost, repoPath(owner, repo, "pulls"), nil, pr, &out)
	return out, err
}

// FindPullRequest returns the newest pull request of owner/repo, open or
// closed, whose head is "owner:branch" (GET /repos/{owner}/{repo}/pulls
// ?head=&state=all); found is false when there is none.
func (c *Client) FindPullRequest(ctx context.Context, owner, repo, branch string) (pr PullRequest, found bool, err error) {
	q := url.Values{"head": {owner + ":" + branch}, "state": {"all"}, "per_page": {"10"}}
	var out []PullRequest
	if _, err := c.repoDo(ctx, owner, repo, http.MethodGet, repoPath(owner, repo, "pulls"), q, nil, &out); err != nil {
		return PullRequest{}, false, err
	}
	for _, p := range out {
		if p.Head.Ref == branch {
			return p, true, nil
		}
	}
	return PullRequest{}, false, nil
}

// CreateIssueComment comments on issue (or pull request) number of
// owner/repo (POST /repos/{owner}/{repo}/issues/{number}/comments).
func (c *Client) CreateIssueComment(ctx context.Context, owner, repo string, number int, body string) (IssueComment, error) {
	var out IssueComment
	_, err := c.repoDo(ctx, owner, repo, http.MethodPost, repoPath(owner, repo, "issues", strconv.Itoa(number), "comments"), nil,
		map[string]string{"body": body}, &out)
	return out, err
}

// DeleteIssueComment deletes comment id of owner/repo
// (DELETE /repos/{owner}/{repo}/issues/comments/{id}); one already gone
// is not an error.
func (c *Client) DeleteIssueComment(ctx context.Context, owner, repo string, id int64) error {
	_, err := c.repoDo(ctx, owner, repo, http.MethodDelete, repoPath(owner, repo, "issues", "comments", strconv.FormatInt(id, 10)), nil, nil, nil)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// AddLabels adds labels to issue (or pull request) number of owner/repo
// (POST /repos/{owner}/{repo}/issues/{number}/labels); labels it has
// already are kept, missing ones are created by GitHub.
func (c *Client) AddLabels(ctx context.Context, owner, repo string, number int, labels ...string) error {
	_, err := c.repoDo(ctx, owner, repo, http.MethodPost, repoPath(owner, repo, "issues", strconv.Itoa(number), "labels"), nil,
		map[string][]string{"labels": labels}, nil)
	return err
}

// ReviewComment is a comment on a pull request's diff (a review thread's).
type ReviewComment struct {
	ID          int64  `json:"id"`
	Body        string `json:"body"`
	Path        string `json:"path"`
	DiffHunk    string `json:"diff_hunk"`
	InReplyToID int64  `json:"in_reply_to_id,omitempty"`
	HTMLURL     string `json:"html_url"`
	User        User   `json:"user"`
}

// ListReviewComments returns the review comments of pull request number,
// oldest first, following the Link header for up to 3,000.
func (c *Client) ListReviewComments(ctx context.Context, owner, repo string, number int) ([]ReviewComment, error) {
	return listPages[ReviewComment](ctx, c, owner, repo, repoPath(owner, repo, "pulls", strconv.Itoa(number), "comments"))
}

// ReplyToReviewComment answers review comment id's thread on pull request
// number (POST /repos/{owner}/{repo}/pulls/{number}/comments/{id}/replies).
func (c *Client) ReplyToReviewComment(ctx context.Context, owner, repo string, number int, id int64, body string) (ReviewComment, error) {
	var out ReviewComment
	_, err := c.repoDo(ctx, owner, repo, http.MethodPost,
		repoPath(owner, repo, "pulls", strconv.Itoa(number), "comments", strconv.FormatInt(id, 10), "replies"), nil,
		map[string]string{"body": body}, &out)
	return out, err
}

// DeleteReviewComment deletes review comment id; one already gone is not
// an error.
func (c *Client) DeleteReviewComment(ctx context.Context, owner, repo string, id int64) error {
	_, err := c.repoDo(ctx, owner, repo, http.MethodDelete, repoPath(owner, repo, "pulls", "comments", strconv.FormatInt(id, 10)), nil, nil, nil)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// CollaboratorPermission returns user's permission on owner/repo: "admin",
// "maintain", "write", "triage", "read" or "none"
// (GET /repos/{owner}/{repo}/collaborators/{user}/permission; GitHub's
// "permission" field folds maintain into write and triage into read, so
// role_name is preferred).
func (c *Client) CollaboratorPermission(ctx context.Context, owner, repo, user string) (string, error) {
	var out struct {
		Permission string `json:"permission"`
		RoleName   string `json:"role_name"`
	}
	_, err := c.repoDo(ctx, owner, repo, http.MethodGet, repoPath(owner, repo, "collaborators", user, "permission"), nil, nil, &out)
	if errors.Is(err, ErrNotFound) {
		return "none", nil
	}
	if err != nil {
		return "", err
	}
	if out.RoleName != "" {
		return out.RoleName, nil
	}
	return out.Permission, nil
}

// maxCommentPages bounds the comment listings (100 comments per page).
const maxCommentPages = 30

// ListIssueComments returns the comments on issue number of owner/repo,
// oldest first, following the Link header for up to 3,000 comments.
func (c *Client) ListIssueComments(ctx context.Context, owner, repo string, number int) ([]IssueComment, error) {
	return listPages[IssueComment](ctx, c, owner, repo, repoPath(owner, repo, "issues", strconv.Itoa(number), "comments"))
}

// listPages GETs path page by page (100 items each), following the Link
// header, for up to maxCommentPages pages.
func listPages[T any](ctx context.Context, c *Client, owner, repo, path string) ([]T, error) {
	var all []T
	q := url.Values{"per_page": {"100"}}
	for page := 1; page <= maxCommentPages; page++ {
		q.Set("page", strconv.Itoa(page))
		var out []T
		h, err := c.repoDo(ctx, owner, repo, http.MethodGet, path, q, nil, &out)
		if err != nil {
			return nil, err
		}
		all = append(all, out...)
		if !hasNext(h.Get("Link")) {
			break
		}
	}
	return all, nil
}

// hasNext reports whether a Link header has a rel="next" entry.
func hasNext(link string) bool {
	for part := range strings.SplitSeq(link, ",") {
		if strings.Contains(part, `rel="next"`) {
			return true
		}
	}
	return false
}

// repoPath builds /repos/{owner}/{repo}/..., escaping each segment.
func repoPath(owner, repo string, rest ...string) string {
	segs := append([]string{"repos", owner, repo}, rest...)
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return "/" + strings.Join(segs, "/")
}

// do sends one API call with retries, decoding a 2xx JSON answer into
// out, and returns the final response's header.
func (c *Client) do(ctx context.Context, token, method, path string, q url.Values, in, out any) (http.Header, error) {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return nil, fmt.Errorf("github: %s %s: encode: %w", method, path, err)
		}
	}
	u := *c.base
	u.Path = strings.TrimSuffix(c.base.Path, "/") + path
	u.RawPath = ""
	u.RawQuery = q.Encode()
	for attempt := 0; ; attempt++ {
		h, wait, err := c.once(ctx, token, method, u.String(), path, body, out)
		if err == nil {
			return h, nil
		}
		if wait < 0 || attempt >= c.cfg.MaxRetries || c.cfg.MaxRetries < 0 {
			return nil, redact(err, token)
		}
		if wait > c.cfg.MaxRetryWait {
			var ae *APIError
			if errors.As(err, &ae) {
				ae.RetryAfter = wait
			}
			return nil, redact(err, token)
		}
		if wait == 0 {
			wait = time.Second << attempt
		}
		if serr := c.sleep(ctx, wait); serr != nil {
			return nil, fmt.Errorf("github: %s %s: %w (while waiting to retry after: %v)", method, path, serr, redact(err, token))
		}
	}
}

// once sends one request. wait is -1 when err is final, else how long to
// wait before retrying (0: the caller's backoff).
func (c *Client) once(ctx context.Context, token, method, rawURL, path string, body []byte, out any) (http.Header, time.Duration, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, rawURL, rd)
	if err != nil {
		return nil, -1, fmt.Errorf("github: %s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", apiVersion)
	req.Header.Set("User-Agent", c.cfg.UserAgent)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		err = fmt.Errorf("github: %s %s: %w", method, path, err)
		if ctx.Err() != nil || method != http.MethodGet {
			// A POST may have landed; the caller's idempotency checks
			// decide, not a blind retry.
			return nil, -1, err
		}
		return nil, 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return nil, 0, fmt.Errorf("github: %s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode/100 == 2 {
		if out != nil && len(bytes.TrimSpace(data)) > 0 {
			if err := json.Unmarshal(data, out); err != nil {
				return nil, -1, fmt.Errorf("github: %s %s: decode answer: %w", method, path, err)
			}
		}
		return resp.Header, 0, nil
	}
	ae := apiError(method, path, resp, data)
	switch {
	case ae.RateLimited:
		return nil, ae.RetryAfter, ae
	case resp.StatusCode >= 500:
		return nil, ae.RetryAfter, ae
	}
	return nil, -1, ae
}

// apiError reads GitHub's error body and rate-limit headers.
func apiError(method, path string, resp *http.Response, data []byte) *APIError {
	ae := &APIError{Method: method, Path: path, StatusCode: resp.StatusCode,
		AcceptedPermissions: resp.Header.Get("X-Accepted-GitHub-Permissions")}
	var body struct {
		Message string            `json:"message"`
		DocURL  string            `json:"documentation_url"`
		Errors  []json.RawMessage `json:"errors"`
	}
	if json.Unmarshal(data, &body) == nil {
		ae.Message, ae.DocumentationURL = body.Message, body.DocURL
		for _, raw := range body.Errors {
			var d struct{ Message, Code, Field string }
			var s string
			switch {
			case json.Unmarshal(raw, &d) == nil && d.Message != "":
				ae.Errors = append(ae.Errors, d.Message)
			case json.Unmarshal(raw, &d) == nil && d.Code != "":
				ae.Errors = append(ae.Errors, strings.TrimSpace(d.Field+" "+d.Code))
			case json.Unmarshal(raw, &s) == nil:
				ae.Errors = append(ae.Errors, s)
			}
		}
	}
	if v := resp.Header.Get("Retry-After"); v != "" {
		if secs, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && secs >= 0 {
			ae.RetryAfter = time.Duration(secs) * time.Second
		}
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests:
		ae.RateLimited = true
	case http.StatusForbidden:
		msg := strings.ToLower(ae.Message)
		switch {
		case strings.Contains(msg, "secondary rate limit"), strings.Contains(msg, "abuse"),
			resp.Header.Get("Retry-After") != "":
			ae.RateLimited = true
		case resp.Header.Get("X-RateLimit-Remaining") == "0":
			ae.RateLimited = true
			if reset, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil && ae.RetryAfter == 0 {
				ae.RetryAfter = max(time.Until(time.Unix(reset, 0)), time.Second)
			}
		}
	}
	if ae.RateLimited && ae.RetryAfter == 0 && resp.StatusCode != http.StatusTooManyRequests {
		// GitHub: without retry-after, wait at least a minute before
		// retrying after a secondary rate limit.
		ae.RetryAfter = time.Minute
	}
	return ae
}

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
