package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/wrenchworks/wrench/github/githubtest"
)

// ghSink is the stand-in GitHub (github/githubtest): the repository the
// webhook's tasks work on, and the sink where the effects of publishing
// them, pull requests and comments, are counted.
type ghSink struct {
	gh     *githubtest.Server
	repo   githubtest.Repo
	secret []byte
	flags  []string // the GitHub flags of serve and the workers
	tb     *progTB

	mu    sync.Mutex
	holds map[string]*hold // by task id: a pull request to hold
}

// hold is a pull request request held until released.
type hold struct {
	hooked, release chan struct{}
	once            sync.Once
}

// newGHSink starts the stand-in with repository acme/hello, a GitHub App
// installed on acme, and the files serve and the workers need under dir.
func newGHSink(dir string, log *slog.Logger) (g *ghSink, err error) {
	tb := &progTB{dir: dir, log: log}
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(tbFailure)
			if !ok {
				panic(r)
			}
			tb.cleanup()
			err = fmt.Errorf("start the stand-in GitHub: %s", f)
		}
	}()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	gh := githubtest.New(tb, "ghs_unusedStaticToken")
	app := gh.EnableApp(tb, 7070, nil)
	gh.Install("acme", nil)
	g = &ghSink{gh: gh, secret: []byte("chaos-webhook-secret"), tb: tb, holds: map[string]*hold{}}
	g.repo = gh.AddRepo(tb, "acme", "hello", map[string]string{"README": "hello\n"})
	key, ca := filepath.Join(dir, "app.pem"), filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(key, app.PrivateKeyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(ca, gh.CA(), 0o644); err != nil {
		return nil, err
	}
	g.flags = []string{"--github-api", gh.APIURL(), "--github-ca", ca, "--github-app-id", "7070", "--github-app-key", key}
	gh.SetHook(g.hook)
	return g, nil
}

// serveArgs are serve's flags: the App, and the webhook.
func (g *ghSink) serveArgs() []string {
	return append(append([]string(nil), g.flags...), "--github-webhook-secret", string(g.secret))
}

// workerEnv makes the workers' model the quick script for the webhook's
// tasks (which name none) and keeps any token of the host's away.
func (g *ghSink) workerEnv(script string) []string {
	return []string{"WRENCH_LLM_MODEL=scripted:" + script, "GITHUB_TOKEN=", "WRENCH_GIT_TOKEN="}
}

// deliver posts a signed comment "/wrench fix it" on issue n, as GitHub
// would (comment id n again when redelivering), and returns the task id
// serve answered with and whether it was a duplicate.
func (g *ghSink) deliver(ctx context.Context, apiURL string, n int, delivery string) (string, bool, error) {
	issue := githubtest.Issue{Number: n, Title: "Write FIXED", Body: "The repository lacks FIXED."}
	payload := githubtest.IssueCommentWithID(g.repo, issue, int64(900000+n), "created",
		githubtest.Actor{Login: "maintainer", Association: "OWNER"}, "/wrench fix it")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, apiURL+"/webhooks/github", bytes.NewReader(payload))
	if err != nil {
		return "", false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "issue_comment")
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", githubtest.Sign(g.secret, payload))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", false, &transientError{err}
	}
	defer resp.Body.Close()
	var a struct {
		TaskID string `json:"task_id"`
		Reason string `json:"reason"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&a)
	switch {
	case resp.StatusCode == http.StatusCreated && a.TaskID != "":
		return a.TaskID, false, nil
	case resp.StatusCode == http.StatusOK && a.TaskID != "":
		return a.TaskID, true, nil
	case resp.StatusCode >= 500:
		return "", false, &transientError{fmt.Errorf("webhook answered %d: %s", resp.StatusCode, a.Reason)}
	}
	return "", false, fmt.Errorf("webhook answered %d: %+v", resp.StatusCode, a)
}

// transientError is a delivery worth trying again.
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// holdPullRequest makes the stand-in hold task id's pull request request
// when it comes: hooked is closed then, and the request goes on once
// release is called.
func (g *ghSink) holdPullRequest(id string) (hooked <-chan struct{}, release func()) {
	h := &hold{hooked: make(chan struct{}), release: make(chan struct{})}
	g.mu.Lock()
	g.holds[id] = h
	g.mu.Unlock()
	var once sync.Once
	return h.hooked, func() {
		once.Do(func() {
			g.mu.Lock()
			delete(g.holds, id)
			g.mu.Unlock()
			close(h.release)
		})
	}
}

// hook holds a pull request request of a task held (bounded: a held
// request is never left hanging).
func (g *ghSink) hook(c githubtest.Call) {
	if c.Git || c.Method != http.MethodPost || c.Path != "/repos/"+g.repo.FullName()+"/pulls" {
		return
	}
	g.mu.Lock()
	var h *hold
	for id, x := range g.holds {
		if bytes.Contains(c.Body, []byte(`"wrench/`+id+`"`)) {
			h = x
		}
	}
	g.mu.Unlock()
	if h == nil {
		return
	}
	h.once.Do(func() { close(h.hooked) })
	select {
	case <-h.release:
	case <-time.After(2 * time.Minute):
	}
}

// effects counts what GitHub holds of task id on issue n: pull requests
// from its branch, comments with its "opened" marker, and all comments on
// the issue.
func (g *ghSink) effects(id string, n int) (prs, opened, comments int) {
	for _, pr := range g.gh.PullRequests(g.repo.Owner, g.repo.Name) {
		if pr.Head.Ref == "wrench/"+id {
			prs++
		}
	}
	marker := fmt.Sprintf("<!-- wrench:task=%s kind=opened -->", id)
	cs := g.gh.Comments(g.repo.Owner, g.repo.Name, n)
	for _, c := range cs {
		if strings.Contains(c.Body, marker) {
			opened++
		}
	}
	return prs, opened, len(cs)
}

func (g *ghSink) close() {
	g.gh.SetHook(nil)
	g.tb.cleanup()
}

// progTB is githubtest.TB for a program: a failure panics with
// tbFailure, which newGHSink turns into an error.
type progTB struct {
	dir      string
	log      *slog.Logger
	mu       sync.Mutex
	cleanups []func()
}

type tbFailure string

func (t *progTB) Helper() {}
func (t *progTB) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}
func (t *progTB) TempDir() string {
	d, err := os.MkdirTemp(t.dir, "gh-")
	if err != nil {
		panic(tbFailure(err.Error()))
	}
	return d
}
func (t *progTB) Error(args ...any)                 { t.log.Error("stand-in GitHub", "err", fmt.Sprint(args...)) }
func (t *progTB) Errorf(format string, args ...any) { t.Error(fmt.Sprintf(format, args...)) }
func (t *progTB) Logf(format string, args ...any)   { t.log.Info(fmt.Sprintf(format, args...)) }
func (t *progTB) Fatal(args ...any)                 { panic(tbFailure(fmt.Sprint(args...))) }
func (t *progTB) Fatalf(format string, args ...any) { panic(tbFailure(fmt.Sprintf(format, args...))) }
func (t *progTB) Skipf(format string, args ...any)  { panic(tbFailure(fmt.Sprintf(format, args...))) }

// cleanup runs the cleanups, last first.
func (t *progTB) cleanup() {
	t.mu.Lock()
	fs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
