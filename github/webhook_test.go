package github_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/github"
	"github.com/wrenchworks/wrench/github/githubtest"
	"github.com/wrenchworks/wrench/policy"
	"github.com/wrenchworks/wrench/task"
)

// *api.Server is where serve mounts the webhook.
var _ github.Mux = (*api.Server)(nil)

func TestSignatureTestVector(t *testing.T) {
	// From GitHub's "Validating webhook deliveries".
	got := githubtest.Sign([]byte("It's a Secret to Everybody"), []byte("Hello, World!"))
	if want := "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"; got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
	q := &fakeQueue{}
	h := newHook(t, q, func(c *github.WebhookConfig) { c.Secret = []byte("It's a Secret to Everybody") })
	// A correct signature passes the check; the body is then refused as
	// not JSON (400), not as unauthenticated (401).
	if r := send(t, h, "ping", "d-1", got, "application/json", []byte("Hello, World!")); r.Code != http.StatusBadRequest {
		t.Fatalf("correct signature: %d %s", r.Code, r.Reason)
	}
}

func TestWebhookSignature(t *testing.T) {
	body := githubtest.IssueLabeled(hookRepo, bug, "wrench", owner)
	good := githubtest.Sign(secret, body)
	cases := []struct {
		name string
		sig  string
		body []byte
		code int
	}{
		{"valid", good, body, http.StatusCreated},
		{"missing", "", body, http.StatusUnauthorized},
		{"wrong secret", githubtest.Sign([]byte("other"), body), body, http.StatusUnauthorized},
		{"body changed", good, bytes.Replace(body, []byte("Add(2, 2)"), []byte("rm -rf /"), 1), http.StatusUnauthorized},
		{"sha1 header value", "sha1=" + strings.TrimPrefix(good, "sha256="), body, http.StatusUnauthorized},
		{"not hex", "sha256=zz", body, http.StatusUnauthorized},
		{"truncated", good[:len(good)-2], body, http.StatusUnauthorized},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := &fakeQueue{}
			r := send(t, newHook(t, q, nil), "issues", "d-"+c.name, c.sig, "application/json", c.body)
			if r.Code != c.code {
				t.Fatalf("code %d (%s), want %d", r.Code, r.Reason, c.code)
			}
			if want := 0; c.code != http.StatusCreated && len(q.submitted()) != want {
				t.Errorf("%d tasks submitted on a refused delivery", len(q.submitted()))
			}
		})
	}
}

var idPattern = regexp.MustCompile(`^gh-acme-calc-12-[0-9a-f]{12}$`)

func TestWebhookLabeledIssue(t *testing.T) {
	q := &fakeQueue{}
	h := newHook(t, q, func(c *github.WebhookConfig) {
		c.TestCommand = func(repo string) string {
			if repo == "acme/calc" {
				return "go test ./..."
			}
			return ""
		}
	})
	r := deliver(t, h, "issues", "72d3162e-cc78-11e3-81ab-4c9367dc0958", githubtest.IssueLabeled(hookRepo, bug, "Wrench", owner))
	if r.Code != http.StatusCreated || r.Status != "queued" {
		t.Fatalf("answer %+v", r)
	}
	ts := q.submitted()
	if len(ts) != 1 {
		t.Fatalf("%d tasks", len(ts))
	}
	got := ts[0]
	if !idPattern.MatchString(got.ID) || r.TaskID != got.ID {
		t.Errorf("id %q (answer %q)", got.ID, r.TaskID)
	}
	want := task.Task{
		ID:          got.ID,
		Repo:        task.Repo{URL: "https://github.com/acme/calc.git", Ref: "main"},
		Instruction: "Add subtracts\n\nAdd(2, 2) returns 0.",
		TestCommand: "go test ./...",
		Output:      task.Output{PullRequest: &task.PullRequest{Base: "main"}},
		Source:      task.Source{Kind: "github", Delivery: "72d3162e-cc78-11e3-81ab-4c9367dc0958", Issue: "acme/calc#12"},
		Tenant:      task.DefaultTenant,
	}
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if string(gj) != string(wj) {
		t.Errorf("task\n got %s\nwant %s", gj, wj)
	}
}

// A webhook task's tenant is the server's choice: the tenant that lists
// the repository's GitHub owner in the policy.
func TestWebhookTenantByOwner(t *testing.T) {
	pol, err := policy.Parse([]byte("tenants:\n  - {name: calc-team, github: [ACME]}\n"), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q := &fakeQueue{}
	h := newHook(t, q, func(c *github.WebhookConfig) { c.Policy = pol })
	r := deliver(t, h, "issues", "72d3162e-cc78-11e3-81ab-4c9367dc0959", githubtest.IssueLabeled(hookRepo, bug, "Wrench", owner))
	if r.Code != http.StatusCreated {
		t.Fatalf("answer %+v", r)
	}
	if ts := q.submitted(); len(ts) != 1 || ts[0].Tenant != "calc-team" {
		t.Fatalf("submitted %+v, want one task of tenant calc-team", ts)
	}
}

func TestWebhookComment(t *testing.T) {
	cases := []struct {
		name   string
		action string
		author githubtest.Actor
		body   string
		issue  githubtest.Issue
		queued bool
	}{
		{"owner", "created", owner, "/wrench also add a test", bug, true},
		{"member, leading space, bare command", "created", githubtest.Actor{Login: "m", Association: "MEMBER"}, "  /wrench", bug, true},
		{"collaborator on a closed issue", "created", githubtest.Actor{Login: "c", Association: "COLLABORATOR"}, "/wrench\nplease",
			githubtest.Issue{Number: 12, Title: "t", State: "closed"}, true},
		{"contributor", "created", githubtest.Actor{Login: "c", Association: "CONTRIBUTOR"}, "/wrench fix", bug, false},
		{"no association", "created", githubtest.Actor{Login: "drive-by", Association: "NONE"}, "/wrench fix", bug, false},
		{"bot type", "created", githubtest.Actor{Login: "helper", Bot: true, Association: "OWNER"}, "/wrench fix", bug, false},
		{"bot login", "created", githubtest.Actor{Login: "renovate[bot]", Association: "MEMBER"}, "/wrench fix", bug, false},
		{"prefix glued to a word", "created", owner, "/wrenchy fix", bug, false},
		{"prefix not first", "created", owner, "please /wrench fix", bug, false},
		{"edited", "edited", owner, "/wrench fix", bug, false},
		{"deleted", "deleted", owner, "/wrench fix", bug, false},
		{"pull request conversation", "created", owner, "/wrench fix", githubtest.Issue{Number: 12, Title: "t", PullRequest: true}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := &fakeQueue{}
			r := deliver(t, newHook(t, q, nil), "issue_comment", "d-1", githubtest.IssueComment(hookRepo, c.issue, c.action, c.author, c.body))
			if !c.queued {
				if r.Code != http.StatusAccepted || r.Status != "ignored" || r.Reason == "" || len(q.submitted()) != 0 {
					t.Fatalf("answer %+v, %d tasks; want ignored with a reason", r, len(q.submitted()))
				}
				return
			}
			if r.Code != http.StatusCreated || len(q.submitted()) != 1 {
				t.Fatalf("answer %+v, %d tasks", r, len(q.submitted()))
			}
			if rest := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(c.body), "/wrench")); rest != "" {
				if in := q.submitted()[0].Instruction; !strings.Contains(in, "@"+c.author.Login) || !strings.HasSuffix(in, rest) {
					t.Errorf("instruction lacks the comment:\n%s", in)
				}
			}
		})
	}
}

func TestWebhookIgnores(t *testing.T) {
	cases := []struct {
		name, event string
		body        []byte
	}{
		{"other label", "issues", githubtest.IssueLabeled(hookRepo, bug, "bug", owner)},
		{"closed issue labeled", "issues", githubtest.IssueLabeled(hookRepo, githubtest.Issue{Number: 1, Title: "t", State: "closed"}, "wrench", owner)},
		{"issue opened", "issues", bytes.Replace(githubtest.IssueLabeled(hookRepo, bug, "wrench", owner), []byte(`"labeled"`), []byte(`"opened"`), 1)},
		{"push event", "push", []byte(`{"ref":"refs/heads/main"}`)},
		{"pull_request event", "pull_request", []byte(`{"action":"labeled"}`)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := &fakeQueue{}
			r := deliver(t, newHook(t, q, nil), c.event, "d-1", c.body)
			if r.Code != http.StatusAccepted || r.Status != "ignored" || r.Reason == "" || len(q.submitted()) != 0 {
				t.Fatalf("answer %+v, %d tasks", r, len(q.submitted()))
			}
		})
	}
}

func TestWebhookPing(t *testing.T) {
	q := &fakeQueue{}
	if r := deliver(t, newHook(t, q, nil), "ping", "d-1", githubtest.Ping(hookRepo)); r.Code != http.StatusOK || r.Status != "ok" {
		t.Fatalf("ping: %+v", r)
	}
}

func TestWebhookRedeliveryIsDuplicate(t *testing.T) {
	q := &fakeQueue{}
	h := newHook(t, q, nil)
	label := githubtest.IssueLabeled(hookRepo, bug, "wrench", owner)
	first := deliver(t, h, "issues", "guid-1", label)
	again := deliver(t, h, "issues", "guid-1", label)
	if first.Code != http.StatusCreated || again.Code != http.StatusOK || again.Status != "duplicate" || again.TaskID != first.TaskID {
		t.Fatalf("first %+v, redelivery %+v", first, again)
	}
	// The signature does not cover the delivery header: a captured
	// delivery replayed under a new GUID is still the same task.
	if replay := deliver(t, h, "issues", "forged-guid", label); replay.Status != "duplicate" || replay.TaskID != first.TaskID {
		t.Fatalf("replay under a new delivery id: %+v", replay)
	}
	// Removing and adding the label again is a new request.
	relabelled := bug
	relabelled.UpdatedAt = "2019-05-16T09:00:00Z"
	if r := deliver(t, h, "issues", "guid-2", githubtest.IssueLabeled(hookRepo, relabelled, "wrench", owner)); r.Code != http.StatusCreated || r.TaskID == first.TaskID {
		t.Fatalf("relabel: %+v", r)
	}
	// So is a second /wrench comment with the same text.
	c1 := githubtest.IssueCommentWithID(hookRepo, bug, 501, "created", owner, "/wrench")
	c2 := githubtest.IssueCommentWithID(hookRepo, bug, 502, "created", owner, "/wrench")
	r1 := deliver(t, h, "issue_comment", "guid-3", c1)
	r2 := deliver(t, h, "issue_comment", "guid-4", c2)
	r1again := deliver(t, h, "issue_comment", "guid-5", c1)
	if r1.Code != http.StatusCreated || r2.Code != http.StatusCreated || r1.TaskID == r2.TaskID || r1again.Status != "duplicate" {
		t.Fatalf("comments: %+v, %+v, replay %+v", r1, r2, r1again)
	}
	if n := len(q.submitted()); n != 4 {
		t.Errorf("%d tasks, want 4", n)
	}
}

func TestWebhookAllowlist(t *testing.T) {
	q := &fakeQueue{}
	h := newHook(t, q, func(c *github.WebhookConfig) { c.AllowedRepos = []string{"ACME/Calc", "acme/other"} })
	if r := deliver(t, h, "issues", "d-1", githubtest.IssueLabeled(hookRepo, bug, "wrench", owner)); r.Code != http.StatusCreated {
		t.Fatalf("allowed repository: %+v", r)
	}
	other := hookRepo
	other.Name, other.CloneURL = "secret", "https://github.com/acme/secret.git"
	if r := deliver(t, h, "issues", "d-2", githubtest.IssueLabeled(other, bug, "wrench", owner)); r.Code != http.StatusAccepted || !strings.Contains(r.Reason, "allowlist") {
		t.Fatalf("repository off the list: %+v", r)
	}
	if n := len(q.submitted()); n != 1 {
		t.Errorf("%d tasks, want 1", n)
	}
}

func TestWebhookRefusesCloneURLs(t *testing.T) {
	for _, u := range []string{
		"/srv/git/calc", "file:///srv/git/calc", "http://github.com/acme/calc.git",
		"https://evil.example.com/acme/calc.git", "https://github.com/acme/other.git",
		"https://x-access-token:t@github.com/acme/calc.git", "https://github.com/acme/calc.git?x=1", "",
	} {
		t.Run(u, func(t *testing.T) {
			q := &fakeQueue{}
			r := hookRepo
			r.CloneURL = u
			got := deliver(t, newHook(t, q, nil), "issues", "d-1", githubtest.IssueLabeled(r, bug, "wrench", owner))
			if got.Code != http.StatusBadRequest || len(q.submitted()) != 0 {
				t.Fatalf("clone_url %q: %+v, %d tasks", u, got, len(q.submitted()))
			}
		})
	}
	// GitHub Enterprise: the configured host is accepted.
	q := &fakeQueue{}
	ghe := hookRepo
	ghe.CloneURL = "https://ghe.example.com/acme/calc.git"
	h := newHook(t, q, func(c *github.WebhookConfig) { c.WebURL = "https://ghe.example.com" })
	if r := deliver(t, h, "issues", "d-1", githubtest.IssueLabeled(ghe, bug, "wrench", owner)); r.Code != http.StatusCreated {
		t.Fatalf("enterprise host: %+v", r)
	}
}

func TestWebhookBadRequests(t *testing.T) {
	q := &fakeQueue{}
	h := newHook(t, q, func(c *github.WebhookConfig) { c.MaxBody = 4096 })
	label := githubtest.IssueLabeled(hookRepo, bug, "wrench", owner)
	big := githubtest.IssueLabeled(hookRepo, githubtest.Issue{Number: 1, Title: "t", Body: strings.Repeat("x", 5000)}, "wrench", owner)
	cases := []struct {
		name string
		r    reply
		code int
	}{
		{"not JSON", deliver(t, h, "issues", "d-1", []byte(`{"action":`)), http.StatusBadRequest},
		{"JSON array", deliver(t, h, "issues", "d-1", []byte(`[]`)), http.StatusBadRequest},
		{"no issue", deliver(t, h, "issues", "d-1", []byte(`{"action":"labeled","label":{"name":"wrench"}}`)), http.StatusBadRequest},
		{"no updated_at", deliver(t, h, "issues", "d-1", bytes.Replace(label, []byte(`"updated_at": "2019-05-15T15:20:18Z"`), []byte(`"updated_at": ""`), 1)), http.StatusBadRequest},
		{"no comment id", deliver(t, h, "issue_comment", "d-1", githubtest.IssueCommentWithID(hookRepo, bug, 0, "created", owner, "/wrench")), http.StatusBadRequest},
		{"no event header", deliver(t, h, "", "d-1", label), http.StatusBadRequest},
		{"no delivery header", deliver(t, h, "issues", "", label), http.StatusBadRequest},
		{"over the body limit", deliver(t, h, "issues", "d-1", big), http.StatusRequestEntityTooLarge},
	}
	for _, c := range cases {
		if c.r.Code != c.code {
			t.Errorf("%s: %+v, want %d", c.name, c.r, c.code)
		}
	}
	if n := len(q.submitted()); n != 0 {
		t.Errorf("%d tasks from bad requests", n)
	}
	req := httptest.NewRequest(http.MethodGet, "/webhooks/github", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", rec.Code)
	}
}

func TestWebhookFormEncoded(t *testing.T) {
	q := &fakeQueue{}
	body := []byte(url.Values{"payload": {string(githubtest.IssueLabeled(hookRepo, bug, "wrench", owner))}}.Encode())
	r := send(t, newHook(t, q, nil), "issues", "d-1", githubtest.Sign(secret, body), "application/x-www-form-urlencoded", body)
	if r.Code != http.StatusCreated {
		t.Fatalf("form payload: %+v", r)
	}
}

func TestWebhookQueueErrors(t *testing.T) {
	q := &fakeQueue{err: errors.New("nats: no responders")}
	r := deliver(t, newHook(t, q, nil), "issues", "d-1", githubtest.IssueLabeled(hookRepo, bug, "wrench", owner))
	if r.Code != http.StatusServiceUnavailable {
		t.Fatalf("queue down: %+v", r)
	}
	// A task the queue finds invalid is the payload's fault: 400.
	q = &fakeQueue{}
	empty := githubtest.Issue{Number: 3, Title: "   "}
	if r := deliver(t, newHook(t, q, nil), "issues", "d-2", githubtest.IssueLabeled(hookRepo, empty, "wrench", owner)); r.Code != http.StatusBadRequest {
		t.Fatalf("invalid task: %+v", r)
	}
}

func TestWebhookHugeIssueFitsATask(t *testing.T) {
	q := &fakeQueue{}
	huge := githubtest.Issue{Number: 4, Title: strings.Repeat("T", 1000), Body: strings.Repeat("é", 40000)}
	r := deliver(t, newHook(t, q, nil), "issue_comment", "d-1",
		githubtest.IssueComment(hookRepo, huge, "created", owner, "/wrench "+strings.Repeat("c", 70000)))
	if r.Code != http.StatusCreated {
		t.Fatalf("%+v", r)
	}
	in := q.submitted()[0].Instruction
	if len(in) > task.MaxInstructionBytes || !strings.Contains(in, "[… truncated]") {
		t.Errorf("instruction is %d bytes, limit %d", len(in), task.MaxInstructionBytes)
	}
}

func TestMount(t *testing.T) {
	q := &fakeQueue{}
	mux := http.NewServeMux()
	if _, err := github.Mount(mux, github.WebhookConfig{Secret: secret, Submit: q.Submit}); err != nil {
		t.Fatal(err)
	}
	if r := deliver(t, mux, "issues", "d-1", githubtest.IssueLabeled(hookRepo, bug, "wrench", owner)); r.Code != http.StatusCreated {
		t.Fatalf("mounted webhook: %+v", r)
	}
	if _, err := github.Mount(mux, github.WebhookConfig{Submit: q.Submit}); err == nil {
		t.Error("Mount without a secret succeeded")
	}
}

func TestWebURLFor(t *testing.T) {
	for in, want := range map[string]string{
		"":                                "https://github.com",
		"https://api.github.com":          "https://github.com",
		"https://api.github.com/":         "https://github.com",
		"https://ghe.example.com/api/v3":  "https://ghe.example.com",
		"https://ghe.example.com/API/v3/": "https://ghe.example.com",
	} {
		if got := github.WebURLFor(in); got != want {
			t.Errorf("WebURLFor(%q) = %q, want %q", in, got, want)
		}
	}
}
