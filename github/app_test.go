package github_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/github"
	"github.com/wrenchworks/wrench/github/githubtest"
)

// appFixture is the publisher fixture authenticated as a GitHub App
// installed on acme with perms (all that Wrench needs when nil).
func appFixture(t *testing.T, perms githubtest.Permissions, refresh time.Duration) (*fixture, *github.App, *bytes.Buffer) {
	t.Helper()
	f := newFixture(t, nil)
	a := f.gh.EnableApp(t, 4242, nil)
	f.gh.Install("acme", perms)
	var logBuf bytes.Buffer
	app, err := github.NewApp(github.AppConfig{AppID: "4242", PrivateKey: a.PrivateKeyPEM, APIURL: f.gh.APIURL(),
		HTTPClient: f.gh.Client(), RefreshBefore: refresh,
		Logger: slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	f.pub, err = github.NewPublisher(github.PublisherConfig{Tokens: app, APIURL: f.gh.APIURL(), WebURL: f.gh.URL(),
		HTTPClient: f.gh.Client(), CABundle: f.gh.CA(),
		Logger: slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	return f, app, &logBuf
}

// TestAppTokenCachedAndScoped: one installation token per repository,
// reused while fresh, scoped to that repository only.
func TestAppTokenCachedAndScoped(t *testing.T) {
	f, app, _ := appFixture(t, nil, 0)
	f.gh.AddRepo(t, "acme", "other", map[string]string{"x": "x\n"})
	ctx := context.Background()
	tok, err := app.Token(ctx, "acme", "calc")
	if err != nil {
		t.Fatal(err)
	}
	again, err := app.Token(ctx, "acme", "calc")
	if err != nil || again.Value != tok.Value {
		t.Fatalf("second Token: %v, same=%v", err, again.Value == tok.Value)
	}
	if n := f.gh.TokensIssued(); n != 1 {
		t.Errorf("%d tokens minted for two calls, want 1", n)
	}
	if tok.Permissions["pull_requests"] != "write" || tok.ExpiresAt.Before(time.Now().Add(50*time.Minute)) {
		t.Errorf("token permissions %v, expires %s", tok.Permissions, tok.ExpiresAt)
	}
	// The token reaches acme/calc and nothing else.
	scoped, _ := github.NewClient(github.ClientConfig{BaseURL: f.gh.APIURL(), Token: tok.Value, HTTPClient: f.gh.Client()})
	if _, err := scoped.ListIssueComments(ctx, "acme", "calc", 1); err != nil {
		t.Errorf("token on its repository: %v", err)
	}
	if _, err := scoped.ListIssueComments(ctx, "acme", "other", 1); !errors.Is(err, github.ErrNotFound) {
		t.Errorf("token on another repository: %v, want not found", err)
	}
	if fmtd := strings.Join([]string{tok.String(), tok.GoString()}, " "); strings.Contains(fmtd, tok.Value) {
		t.Errorf("Token formats its value: %s", fmtd)
	}
}

// TestAppTokenRefreshedBeforeExpiry: installation tokens that live two
// seconds; a publish that starts after the first one has expired still
// pushes, opens the pull request and comments, with a new token.
func TestAppTokenRefreshedBeforeExpiry(t *testing.T) {
	f, app, logs := appFixture(t, nil, 0)
	f.gh.SetTokenTTL(2 * time.Second)
	ctx := context.Background()
	first, err := app.Token(ctx, "acme", "calc") // the clone's, at task start
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(first.ExpiresAt) + 100*time.Millisecond) // the task outlives it
	tk := f.task("gh-acme-calc-7-aaaaaaaaaaaa", 7)
	u, err := f.pub.Publish(ctx, tk, f.result(t, tk.ID))
	if err != nil {
		t.Fatalf("publish after the first token expired: %v\n%s", err, logs)
	}
	if u == "" || len(f.gh.PullRequests("acme", "calc")) != 1 {
		t.Fatalf("no pull request (%q)", u)
	}
	if n := f.gh.TokensIssued(); n < 2 {
		t.Errorf("%d tokens minted, want a fresh one after expiry", n)
	}
	for _, r := range f.gh.Requests() {
		if !r.Authorized {
			t.Errorf("%s %s was sent with an expired token: the cache should have replaced it first", r.Method, r.Path)
		}
	}
	// Replaced in the last quarter of its life, before GitHub refuses it.
	cur, _ := app.Token(ctx, "acme", "calc")
	time.Sleep(time.Until(cur.ExpiresAt) - 150*time.Millisecond)
	if next, _ := app.Token(ctx, "acme", "calc"); next.Value == cur.Value {
		t.Errorf("token reused %s before its expiry", time.Until(cur.ExpiresAt))
	}
	for _, v := range f.gh.TokenValues() {
		if strings.Contains(logs.String(), v) {
			t.Errorf("an installation token is in the log")
		}
	}
}

// TestAppRevokedTokenReplaced: GitHub refusing a cached token (revoked)
// makes the client drop it and retry once with a new one.
func TestAppRevokedTokenReplaced(t *testing.T) {
	f, app, _ := appFixture(t, nil, 0)
	ctx := context.Background()
	if _, err := app.Token(ctx, "acme", "calc"); err != nil {
		t.Fatal(err)
	}
	f.gh.RevokeTokens()
	tk := f.task("gh-acme-calc-8-bbbbbbbbbbbb", 8)
	if _, err := f.pub.Publish(ctx, tk, f.result(t, tk.ID)); err != nil {
		t.Fatalf("publish with a revoked cached token: %v", err)
	}
	if n := f.gh.TokensIssued(); n != 2 {
		t.Errorf("%d tokens minted, want 2 (the revoked one and its replacement)", n)
	}
}

// TestAppMissingPermission: an installation without pull requests: write
// gets an error naming the permission before anything is pushed, and the
// issue comment says so.
func TestAppMissingPermission(t *testing.T) {
	perms := githubtest.FullPermissions()
	perms["pull_requests"] = "read"
	f, _, _ := appFixture(t, perms, 0)
	tk := f.task("gh-acme-calc-9-cccccccccccc", 9)
	_, err := f.pub.Publish(context.Background(), tk, f.result(t, tk.ID))
	if !errors.Is(err, github.ErrMissingPermission) {
		t.Fatalf("err = %v, want ErrMissingPermission", err)
	}
	for _, want := range []string{`"pull_requests"`, "write", "it has read", `"Pull requests": "Read and write"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %s", err, want)
		}
	}
	if f.gh.Pushes() != 0 {
		t.Errorf("%d pushes despite the missing permission", f.gh.Pushes())
	}
	cs := f.gh.Comments("acme", "calc", 9)
	if len(cs) != 1 || !strings.Contains(cs[0].Body, "pull_requests") {
		t.Errorf("issue comments %+v, want one naming pull_requests", cs)
	}
}

// TestMissingPermissionFromGitHub: with a token of unknown permissions
// (used as a personal token), GitHub's 403 and its
// X-Accepted-GitHub-Permissions header name what is missing.
func TestMissingPermissionFromGitHub(t *testing.T) {
	perms := githubtest.FullPermissions()
	perms["issues"] = "read"
	f, app, _ := appFixture(t, perms, 0)
	tok, err := app.Token(context.Background(), "acme", "calc")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := github.NewClient(github.ClientConfig{BaseURL: f.gh.APIURL(), Token: tok.Value, HTTPClient: f.gh.Client()})
	_, err = c.CreateIssueComment(context.Background(), "acme", "calc", 3, "hello")
	if !errors.Is(err, github.ErrMissingPermission) || !errors.Is(err, github.ErrForbidden) {
		t.Fatalf("err = %v, want a 403 missing permission", err)
	}
	if !strings.Contains(err.Error(), "issues=write") {
		t.Errorf("error %q does not name issues=write", err)
	}
}

// TestAppBadKey: a JWT signed with another key is refused, and the error
// says which call failed.
func TestAppBadKey(t *testing.T) {
	f, _, _ := appFixture(t, nil, 0)
	other := githubtest.New(t, "x").EnableApp(t, 4242, nil) // same id, another key
	app, err := github.NewApp(github.AppConfig{AppID: "4242", PrivateKey: other.PrivateKeyPEM, APIURL: f.gh.APIURL(), HTTPClient: f.gh.Client()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = app.Token(context.Background(), "acme", "calc")
	if !errors.Is(err, github.ErrUnauthorized) {
		t.Errorf("err = %v, want unauthorized", err)
	}
	if _, err := github.NewApp(github.AppConfig{AppID: "1", PrivateKey: []byte("not a key")}); err == nil {
		t.Error("NewApp accepted a key that is not PEM")
	}
}

// TestAppNotInstalled: a repository the App is not installed on is
// ErrNotInstalled, saying what to do.
func TestAppNotInstalled(t *testing.T) {
	f, app, _ := appFixture(t, nil, 0)
	f.gh.AddRepo(t, "elsewhere", "repo", map[string]string{"x": "x\n"})
	_, err := app.Token(context.Background(), "elsewhere", "repo")
	if !errors.Is(err, github.ErrNotInstalled) || !strings.Contains(err.Error(), "install the App") {
		t.Errorf("err = %v, want ErrNotInstalled with advice", err)
	}
}

// TestCheckApp: the doctor's check names the permission an installation
// lacks, and passes when every installation has them all.
func TestCheckApp(t *testing.T) {
	gh := githubtest.New(t, "x")
	a := gh.EnableApp(t, 77, nil)
	gh.Install("acme", nil)
	partial := githubtest.FullPermissions()
	delete(partial, "issues")
	gh.Install("umbrella", partial)
	app, err := github.NewApp(github.AppConfig{AppID: "77", PrivateKey: a.PrivateKeyPEM, APIURL: gh.APIURL(), HTTPClient: gh.Client()})
	if err != nil {
		t.Fatal(err)
	}
	c := github.CheckApp(context.Background(), app)
	if c.OK() || len(c.Problems) != 1 {
		t.Fatalf("problems %+v, want one", c.Problems)
	}
	if msg := c.Problems[0].Message; !strings.Contains(msg, "umbrella") || !strings.Contains(msg, `"issues"`) {
		t.Errorf("problem %q does not name umbrella and issues", msg)
	}
	if s := c.Summary(); !strings.Contains(s, "acme, umbrella (missing issues: write)") {
		t.Errorf("summary %q", s)
	}

	gh2 := githubtest.New(t, "x")
	b := gh2.EnableApp(t, 78, nil)
	gh2.Install("acme", nil)
	app2, _ := github.NewApp(github.AppConfig{AppID: "78", PrivateKey: b.PrivateKeyPEM, APIURL: gh2.APIURL(), HTTPClient: gh2.Client()})
	if c := github.CheckApp(context.Background(), app2); !c.OK() {
		t.Errorf("a complete installation has problems: %+v", c.Problems)
	}
}
