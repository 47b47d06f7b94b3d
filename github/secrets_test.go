package github_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/github"
	"github.com/wrenchworks/wrench/github/githubtest"
	"github.com/wrenchworks/wrench/task"
)

// TestTokenNeverLeaks runs every path that handles the token (webhook,
// publish, a failed push, a refused REST call) and looks for the token in
// everything Wrench writes: logs, errors, tasks, results, events, pull
// requests, comments, commits and the publisher's cache directory.
func TestTokenNeverLeaks(t *testing.T) {
	cache := t.TempDir()
	f := newFixture(t, func(c *github.PublisherConfig) { c.CacheDir = cache })
	var seen []string // everything to search
	note := func(what string, v any) {
		switch x := v.(type) {
		case string:
			seen = append(seen, what+": "+x)
		case error:
			if x != nil {
				seen = append(seen, what+": "+x.Error())
			}
		default:
			b, _ := json.Marshal(x)
			seen = append(seen, what+": "+string(b))
		}
	}

	// Webhook → task.
	var hookLog bytes.Buffer
	q := &fakeQueue{}
	h, err := github.NewWebhook(github.WebhookConfig{Secret: secret, Submit: q.Submit, WebURL: f.gh.URL(),
		Logger: slog.New(slog.NewJSONHandler(&hookLog, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	deliver(t, h, "issues", "d-1", githubtest.IssueLabeled(f.repo, githubtest.Issue{Number: 21, Title: "Fix Add"}, "wrench", owner))
	if len(q.submitted()) != 1 {
		t.Fatal("webhook made no task")
	}
	tk := q.submitted()[0]
	note("task", tk)

	// Published as the dispatcher does: the stored result is finalized.
	res := f.result(t, tk.ID)
	if err := f.pub.Finalize(context.Background(), task.Status{TaskID: tk.ID, Task: &tk, State: res.Status, Result: &res}); err != nil {
		t.Fatalf("finalize: %v\n%s", err, f.log)
	}
	note("result", res)

	// A push the server refuses.
	f.gh.Inject(githubtest.Fault{Path: "/acme/calc.git/git-receive-pack", Status: http.StatusForbidden,
		Message: "Permission to acme/calc.git denied to wrench[bot]."})
	other := f.task("gh-acme-calc-22-x", 22)
	_, err = f.pub.Publish(context.Background(), other, f.result(t, other.ID))
	if err == nil {
		t.Fatal("publish with a refused push succeeded")
	}
	note("push error", err)

	// A publisher whose token GitHub refuses.
	bad, err := github.NewPublisher(github.PublisherConfig{Token: testToken + "-revoked", APIURL: f.gh.APIURL(),
		WebURL: f.gh.URL(), HTTPClient: f.gh.Client(), CABundle: f.gh.CA(), Logger: slog.New(slog.NewTextHandler(f.log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	third := f.task("gh-acme-calc-23-x", 23)
	_, err = bad.Publish(context.Background(), third, f.result(t, third.ID))
	if err == nil {
		t.Fatal("publish with a revoked token succeeded")
	}
	note("revoked token error", err)

	note("publisher log", f.log.String())
	note("webhook log", hookLog.String())
	for _, pr := range f.gh.PullRequests("acme", "calc") {
		note("pull request", pr)
	}
	for _, n := range []int{21, 22, 23} {
		for _, c := range f.gh.Comments("acme", "calc", n) {
			note("comment", c.Body)
		}
	}
	for _, r := range f.gh.Requests() {
		note("request body", string(r.Body))
		note("request query", r.Query)
	}
	note("commits", f.gh.Git(t, "acme", "calc", "log", "--all", "-p", "--format=%H %an %ae%n%B"))
	_ = filepath.WalkDir(cache, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			note("cache file "+p, string(b))
		}
		return nil
	})

	if len(seen) < 10 {
		t.Fatalf("searched only %d texts", len(seen))
	}
	for _, s := range seen {
		if strings.Contains(s, testToken) {
			i := strings.Index(s, testToken)
			t.Errorf("token found in %s", s[:min(len(s), max(i+60, 120))])
		}
	}
}
