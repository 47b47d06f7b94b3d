package github_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/wrenchworks/wrench/github"
	"github.com/wrenchworks/wrench/github/githubtest"
	"github.com/wrenchworks/wrench/task"
)

var secret = []byte("webhook-secret-for-tests")

// fakeQueue records submitted tasks and reports known ids as duplicates,
// as queue.Conn.Submit does.
type fakeQueue struct {
	mu    sync.Mutex
	tasks []task.Task
	err   error
}

func (q *fakeQueue) Submit(_ context.Context, t task.Task) (task.Status, bool, error) {
	if err := t.Validate(); err != nil {
		return task.Status{}, false, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return task.Status{}, false, q.err
	}
	for _, old := range q.tasks {
		if old.ID == t.ID {
			return task.Status{TaskID: t.ID, State: task.StateQueued}, true, nil
		}
	}
	q.tasks = append(q.tasks, t)
	return task.Status{TaskID: t.ID, State: task.StateQueued}, false, nil
}

func (q *fakeQueue) submitted() []task.Task {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]task.Task(nil), q.tasks...)
}

// hookRepo is a repository as GitHub's payloads describe it (no server
// behind it: the webhook never contacts GitHub).
var hookRepo = githubtest.Repo{Owner: "acme", Name: "calc", DefaultBranch: "main",
	CloneURL: "https://github.com/acme/calc.git", HTMLURL: "https://github.com/acme/calc"}

var bug = githubtest.Issue{Number: 12, Title: "Add subtracts", Body: "Add(2, 2) returns 0."}

var owner = githubtest.Actor{Login: "maintainer", Association: "OWNER"}

func newHook(t *testing.T, q *fakeQueue, mod func(*github.WebhookConfig)) http.Handler {
	t.Helper()
	cfg := github.WebhookConfig{Secret: secret, Submit: q.Submit}
	if mod != nil {
		mod(&cfg)
	}
	h, err := github.NewWebhook(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

type reply struct {
	Code   int
	Status string `json:"status"`
	TaskID string `json:"task_id"`
	Reason string `json:"reason"`
}

// deliver sends body as event with a valid signature.
func deliver(t *testing.T, h http.Handler, event, delivery string, body []byte) reply {
	t.Helper()
	return send(t, h, event, delivery, githubtest.Sign(secret, body), "application/json", body)
}

func send(t *testing.T, h http.Handler, event, delivery, sig, ctype string, body []byte) reply {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/webhooks/github", bytes.NewReader(body))
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("User-Agent", "GitHub-Hookshot/abc123")
	if event != "" {
		req.Header.Set(github.HeaderEvent, event)
	}
	if delivery != "" {
		req.Header.Set(github.HeaderDelivery, delivery)
	}
	if sig != "" {
		req.Header.Set(github.HeaderSignature, sig)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var r reply
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatalf("answer is not JSON (%d): %s", rec.Code, rec.Body)
	}
	r.Code = rec.Code
	return r
}
