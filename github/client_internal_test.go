package github

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/github/githubtest"
)

const clientToken = "ghp_clientTESTtoken"

// testClient returns a client of a stand-in with owner/repo "acme/calc",
// whose waits are recorded instead of slept.
func testClient(t *testing.T, mod func(*ClientConfig)) (*Client, *githubtest.Server, *[]time.Duration) {
	t.Helper()
	gh := githubtest.New(t, clientToken)
	gh.AddRepo(t, "acme", "calc", map[string]string{"a.txt": "a\n"})
	cfg := ClientConfig{BaseURL: gh.APIURL(), Token: clientToken, HTTPClient: gh.Client()}
	if mod != nil {
		mod(&cfg)
	}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	c.sleep = func(_ context.Context, d time.Duration) error {
		waits = append(waits, d)
		return nil
	}
	return c, gh, &waits
}

const commentsPath = "/repos/acme/calc/issues/1/comments"

func TestClientRetries(t *testing.T) {
	cases := []struct {
		name   string
		faults []githubtest.Fault
		waits  []time.Duration
		err    error // nil: the call succeeds in the end
	}{
		{"5xx then success", []githubtest.Fault{{Path: commentsPath, Status: 502, Times: 2}},
			[]time.Duration{time.Second, 2 * time.Second}, nil},
		{"secondary rate limit honours Retry-After", []githubtest.Fault{{Path: commentsPath, Status: 403,
			Message: "You have exceeded a secondary rate limit.", Header: http.Header{"Retry-After": {"7"}}}},
			[]time.Duration{7 * time.Second}, nil},
		{"secondary rate limit without Retry-After waits a minute", []githubtest.Fault{{Path: commentsPath, Status: 403,
			Message: "You have exceeded a secondary rate limit."}}, []time.Duration{time.Minute}, nil},
		{"429 with Retry-After", []githubtest.Fault{{Path: commentsPath, Status: 429, Header: http.Header{"Retry-After": {"3"}}}},
			[]time.Duration{3 * time.Second}, nil},
		{"Retry-After over the limit is not waited for", []githubtest.Fault{{Path: commentsPath, Status: 429,
			Header: http.Header{"Retry-After": {"3600"}}}}, nil, ErrRateLimited},
		{"5xx past the retries", []githubtest.Fault{{Path: commentsPath, Status: 503, Times: 4}},
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, errors.New("503")},
		{"404 is final", []githubtest.Fault{{Path: commentsPath, Status: 404, Message: "Not Found"}}, nil, ErrNotFound},
		{"401 is final", []githubtest.Fault{{Path: commentsPath, Status: 401, Message: "Bad credentials"}}, nil, ErrUnauthorized},
		{"403 permission is final", []githubtest.Fault{{Path: commentsPath, Status: 403,
			Message: "Resource not accessible by integration"}}, nil, ErrForbidden},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl, gh, waits := testClient(t, nil)
			for _, f := range c.faults {
				gh.Inject(f)
			}
			_, err := cl.CreateIssueComment(context.Background(), "acme", "calc", 1, "hello")
			switch {
			case c.err == nil && err != nil:
				t.Fatalf("err = %v", err)
			case c.err != nil && err == nil:
				t.Fatalf("succeeded, want %v", c.err)
			case c.err != nil && !errors.Is(err, c.err) && !strings.Contains(err.Error(), c.err.Error()):
				t.Fatalf("err = %v, want %v", err, c.err)
			}
			if !reflect.DeepEqual(*waits, c.waits) {
				t.Errorf("waits %v, want %v", *waits, c.waits)
			}
			wantComments := 0
			if c.err == nil {
				wantComments = 1
			}
			if n := len(gh.Comments("acme", "calc", 1)); n != wantComments {
				t.Errorf("%d comments, want %d", n, wantComments)
			}
		})
	}
}

func TestClientPrimaryRateLimit(t *testing.T) {
	cl, gh, waits := testClient(t, nil)
	reset := time.Now().Add(30 * time.Second).Unix()
	gh.Inject(githubtest.Fault{Path: commentsPath, Status: 403, Message: "API rate limit exceeded for installation ID 1.",
		Header: http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {strconv.FormatInt(reset, 10)}}})
	if _, err := cl.CreateIssueComment(context.Background(), "acme", "calc", 1, "x"); err != nil {
		t.Fatal(err)
	}
	if len(*waits) != 1 || (*waits)[0] <= 0 || (*waits)[0] > 31*time.Second {
		t.Errorf("waits %v, want one wait until the reset", *waits)
	}
}

func TestClientNoRetries(t *testing.T) {
	cl, gh, waits := testClient(t, func(c *ClientConfig) { c.MaxRetries = -1 })
	gh.Inject(githubtest.Fault{Path: commentsPath, Status: 502})
	if _, err := cl.CreateIssueComment(context.Background(), "acme", "calc", 1, "x"); err == nil || len(*waits) != 0 {
		t.Fatalf("err %v, waits %v", err, *waits)
	}
}

func TestClientValidationError(t *testing.T) {
	cl, _, _ := testClient(t, nil)
	_, err := cl.CreatePullRequest(context.Background(), "acme", "calc", NewPullRequest{Title: "t", Head: "nope", Base: "main"})
	var ae *APIError
	if !errors.As(err, &ae) || !errors.Is(err, ErrValidation) || ae.StatusCode != 422 || len(ae.Errors) == 0 {
		t.Fatalf("err = %#v", err)
	}
	if !strings.Contains(err.Error(), "head invalid") || ae.Path != "/repos/acme/calc/pulls" || ae.Method != "POST" {
		t.Errorf("error text %q", err)
	}
}

func TestClientPaginatesComments(t *testing.T) {
	cl, gh, _ := testClient(t, nil)
	for i := range 150 {
		gh.AddComment("acme", "calc", 1, "someone", "comment "+strconv.Itoa(i))
	}
	cs, err := cl.ListIssueComments(context.Background(), "acme", "calc", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 150 || cs[149].Body != "comment 149" {
		t.Fatalf("%d comments", len(cs))
	}
	gets := 0
	for _, r := range gh.Requests() {
		if r.Method == http.MethodGet {
			gets++
		}
	}
	if gets != 2 {
		t.Errorf("%d pages fetched, want 2", gets)
	}
}

func TestClientRequests(t *testing.T) {
	cl, gh, _ := testClient(t, func(c *ClientConfig) { c.UserAgent = "wrench-test" })
	if _, _, err := cl.FindPullRequest(context.Background(), "acme", "calc", "wrench/t-1"); err != nil {
		t.Fatal(err)
	}
	r := gh.Requests()[0]
	if !r.Authorized || r.Path != "/repos/acme/calc/pulls" || r.Header.Get("User-Agent") != "wrench-test" ||
		r.Header.Get("X-Github-Api-Version") != apiVersion || !strings.Contains(r.Query, "head=acme%3Awrench%2Ft-1") ||
		!strings.Contains(r.Query, "state=all") {
		t.Errorf("request %+v", r)
	}
	// A wrong token is an ErrUnauthorized, and its text has no token.
	bad, err := NewClient(ClientConfig{BaseURL: gh.APIURL(), Token: "wrong-token-value", HTTPClient: gh.Client()})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = bad.FindPullRequest(context.Background(), "acme", "calc", "x")
	if !errors.Is(err, ErrUnauthorized) || strings.Contains(err.Error(), "wrong-token-value") {
		t.Errorf("err = %v", err)
	}
}

func TestNewClientRefusesBadURLs(t *testing.T) {
	for _, u := range []string{"ftp://x", "https://user:pw@api.github.com", "://", "api.github.com"} {
		if _, err := NewClient(ClientConfig{BaseURL: u}); err == nil {
			t.Errorf("NewClient(%q) succeeded", u)
		}
	}
}
