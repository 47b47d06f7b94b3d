package github

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Sentinel errors. An [*APIError] matches the one for its status code with
// errors.Is, so callers branch without reading status codes.
var (
	// ErrUnauthorized: the token was missing, wrong or expired (401).
	ErrUnauthorized = errors.New("github: unauthorized")
	// ErrForbidden: the token lacks a permission (403, not a rate limit).
	ErrForbidden = errors.New("github: forbidden")
	// ErrNotFound: no such repository, issue or pull request, or the token
	// cannot see it (404).
	ErrNotFound = errors.New("github: not found")
	// ErrValidation: GitHub refused the request's content (422).
	ErrValidation = errors.New("github: validation failed")
	// ErrRateLimited: a primary or secondary rate limit whose wait was
	// longer than the client may wait (403 or 429).
	ErrRateLimited = errors.New("github: rate limited")
	// ErrNotGitHubTask: the task did not come from GitHub
	// (Source.Kind != "github") or does not name its issue.
	ErrNotGitHubTask = errors.New("github: not a GitHub task")
	// ErrPatchDoesNotApply: the result's patch does not apply to its base
	// commit.
	ErrPatchDoesNotApply = errors.New("github: patch does not apply")
	// ErrBaseNotFound: the result's base commit is not on the remote.
	ErrBaseNotFound = errors.New("github: base commit not found")
)

// APIError is a non-2xx answer of the REST API, after any retries.
type APIError struct {
	// Method and Path are the request's (the path never carries a token).
	Method, Path string
	// StatusCode is the HTTP status.
	StatusCode int
	// Message is GitHub's "message".
	Message string
	// Errors are GitHub's validation details ("errors"), each reduced to
	// its message or code.
	Errors []string
	// DocumentationURL is GitHub's "documentation_url".
	DocumentationURL string
	// RateLimited is true for a primary or secondary rate limit.
	RateLimited bool
	// RetryAfter is how long GitHub asked to wait, when it said.
	RetryAfter time.Duration
	// AcceptedPermissions is GitHub's X-Accepted-GitHub-Permissions: the
	// permissions the call needs ("pull_requests=write"; alternatives
	// separated by ";"). On a 403 it names what the token lacks.
	AcceptedPermissions string
}

// Error says which call failed, how, and GitHub's message and details.
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "github: %s %s: %d", e.Method, e.Path, e.StatusCode)
	if e.Message != "" {
		fmt.Fprintf(&b, " %s", e.Message)
	} else {
		fmt.Fprintf(&b, " %s", http.StatusText(e.StatusCode))
	}
	if len(e.Errors) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(e.Errors, "; "))
	}
	if e.RateLimited && e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	if e.missingPermission() {
		fmt.Fprintf(&b, " (the token lacks a permission this call needs: %s; grant it to the GitHub App or token)", e.AcceptedPermissions)
	}
	return b.String()
}

// Is matches the sentinel for e's status code.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrRateLimited:
		return e.RateLimited
	case ErrUnauthorized:
		return e.StatusCode == http.StatusUnauthorized
	case ErrForbidden:
		return e.StatusCode == http.StatusForbidden && !e.RateLimited
	case ErrMissingPermission:
		return e.missingPermission()
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrValidation:
		return e.StatusCode == http.StatusUnprocessableEntity
	}
	return false
}

// missingPermission: a 403 (not a rate limit) naming the permissions the
// call needed.
func (e *APIError) missingPermission() bool {
	return e.StatusCode == http.StatusForbidden && !e.RateLimited && e.AcceptedPermissions != ""
}

// alreadyExists reports whether err is GitHub's 422 for a second pull
// request on the same head and base.
func alreadyExists(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnprocessableEntity {
		return false
	}
	for _, m := range ae.Errors {
		if strings.Contains(strings.ToLower(m), "already exists") {
			return true
		}
	}
	return false
}

// redact returns err unchanged unless its text contains secret; then it
// returns a plain error with the secret replaced, deliberately not wrapping
// the original (whose text would still carry it). Nothing we build puts
// the token in an error; this guards what libraries might echo.
func redact(err error, secret string) error {
	if err == nil || secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), secret, "[redacted]"))
}
