package github_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/github"
	"github.com/wrenchworks/wrench/github/githubtest"
	"github.com/wrenchworks/wrench/policy"
	"github.com/wrenchworks/wrench/task"
)

// gatedBody is a request body that records when the server starts to read
// it and then waits for open before giving its bytes. Sent with
// "Expect: 100-continue", its first Read happens only once the handler
// reads the body.
type gatedBody struct {
	r       io.Reader
	started *atomic.Int32
	open    <-chan struct{}
	once    sync.Once
}

func (b *gatedBody) Read(p []byte) (int, error) {
	b.once.Do(func() {
		b.started.Add(1)
		<-b.open
	})
	return b.r.Read(p)
}

// expectContinueClient sends bodies only when the server asks for them.
func expectContinueClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ExpectContinueTimeout = time.Minute
	tr.MaxConnsPerHost = 0
	return &http.Client{Transport: tr}
}

// post sends one delivery whose body waits for open; it returns the
// answer's status.
func post(t *testing.T, c *http.Client, url, sig string, size int, started *atomic.Int32, open <-chan struct{}) int {
	body := &gatedBody{r: bytes.NewReader(bytes.Repeat([]byte("x"), size)), started: started, open: open}
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		t.Error(err)
		return 0
	}
	req.ContentLength = int64(size)
	req.Header.Set("Expect", "100-continue")
	req.Header.Set(github.HeaderEvent, "issues")
	req.Header.Set(github.HeaderDelivery, "d-hostile")
	if sig != "" {
		req.Header.Set(github.HeaderSignature, sig)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0 // the server may cut a connection whose body it refuses
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// Forty large posts at once, from a stranger: the webhook used to read
// every one whole before looking at its signature (40 × 24 MB took the
// server from 172 MB to 1.18 GB). Now a post without a well-formed
// signature is refused unread, one announcing more than the limit too,
// and at most MaxReads bodies are read at once.
func TestHostileWebhook_StrangersCannotMakeTheServerBuffer(t *testing.T) {
	const posts, size = 40, 1 << 20
	wrongSig := githubtest.Sign([]byte("not the secret"), []byte("x"))
	tests := []struct {
		name        string
		sig         string
		size        int
		maxBody     int64
		wantStarted int32
		wantCodes   []int
	}{
		{name: "no signature", size: size, wantStarted: 0, wantCodes: []int{http.StatusUnauthorized}},
		{name: "malformed signature", sig: "sha256=abc", size: size, wantStarted: 0, wantCodes: []int{http.StatusUnauthorized}},
		{name: "announced over the limit", sig: wrongSig, size: size, maxBody: size - 1, wantStarted: 0, wantCodes: []int{http.StatusRequestEntityTooLarge}},
		{name: "wrong signature", sig: wrongSig, size: size, wantStarted: github.DefaultMaxReads,
			wantCodes: []int{http.StatusUnauthorized, http.StatusServiceUnavailable}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := &fakeQueue{}
			srv := httptest.NewServer(newHook(t, q, func(c *github.WebhookConfig) {
				c.MaxBody, c.ReadTimeout = tt.maxBody, 3*time.Second
			}))
			defer srv.Close()
			client := expectContinueClient()
			var started atomic.Int32
			open := make(chan struct{})
			codes := make(chan int, posts)
			var wg sync.WaitGroup
			for range posts {
				wg.Go(func() { codes <- post(t, client, srv.URL, tt.sig, tt.size, &started, open) })
			}
			time.Sleep(time.Second) // every post reached the server and waits
			n := started.Load()
			t.Logf("%d posts of %d KiB: the server was reading %d bodies at once", posts, tt.size>>10, n)
			if n != tt.wantStarted {
				t.Errorf("the server was reading %d bodies at once, want %d", n, tt.wantStarted)
			}
			close(open)
			wg.Wait()
			close(codes)
			seen := map[int]int{}
			for c := range codes {
				seen[c]++
			}
			for c := range seen {
				if !containsInt(tt.wantCodes, c) {
					t.Errorf("answers %v, want only %v", seen, tt.wantCodes)
					break
				}
			}
			if len(q.submitted()) != 0 {
				t.Error("a task was submitted")
			}
		})
	}
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// A body that trickles in holds its turn at most ReadTimeout.
func TestHostileWebhook_SlowBodyEndsAtTheReadTimeout(t *testing.T) {
	srv := httptest.NewServer(newHook(t, &fakeQueue{}, func(c *github.WebhookConfig) { c.ReadTimeout = 500 * time.Millisecond }))
	defer srv.Close()
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		for {
			if _, err := pw.Write([]byte("x")); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, pr)
	req.Header.Set(github.HeaderSignature, githubtest.Sign(secret, []byte("x")))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err == nil {
		_ = resp.Body.Close()
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("a trickling body held the server %s (err %v)", d.Round(time.Millisecond), err)
	}
}

// FuzzWebhookBody: whatever the body, signature, event and content type,
// the webhook answers with one of its documented statuses and never
// submits a task for a body its signature does not cover.
func FuzzWebhookBody(f *testing.F) {
	for _, s := range []string{
		`{"action":"labeled","label":{"name":"wrench"}}`, `{}`, `[]`, `payload=%7B%7D`, "", "\x00\xff", `{"action":"created","comment":{"body":"/wrench fix it"}}`,
	} {
		f.Add([]byte(s), true, "issues", "application/json")
		f.Add([]byte(s), false, "issue_comment", "application/x-www-form-urlencoded")
	}
	q := &fakeQueue{}
	h, err := github.NewWebhook(github.WebhookConfig{Secret: secret, Submit: q.Submit, MaxBody: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	allowed := map[int]bool{200: true, 201: true, 202: true, 400: true, 401: true, 413: true, 503: true}
	f.Fuzz(func(t *testing.T, body []byte, signed bool, event, ctype string) {
		sig := githubtest.Sign([]byte("wrong"), body)
		if signed {
			sig = githubtest.Sign(secret, body)
		}
		before := len(q.submitted())
		req := httptest.NewRequest(http.MethodPost, "/webhooks/github", bytes.NewReader(body))
		req.Header.Set(github.HeaderSignature, sig)
		req.Header.Set(github.HeaderEvent, event)
		req.Header.Set(github.HeaderDelivery, "d-fuzz")
		req.Header.Set("Content-Type", ctype)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if !allowed[rec.Code] {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		if !strings.HasPrefix(rec.Body.String(), `{"status":`) {
			t.Fatalf("answer is not the JSON answer: %q", rec.Body)
		}
		if !signed && len(q.submitted()) != before {
			t.Fatal("an unsigned body made a task")
		}
	})
}

// The webhook holds its tasks to the server policy as the API does: limits
// over the policy's maximum are a 400 naming the field, and nothing is
// queued.
func TestHostileWebhook_PolicyAtTheWebhook(t *testing.T) {
	q := &fakeQueue{}
	h := newHook(t, q, func(c *github.WebhookConfig) {
		c.Policy = policy.Default(policy.Options{})
		c.Limits = task.Limits{MaxTurns: 100_000}
	})
	r := deliver(t, h, "issues", "d-limits", githubtest.IssueLabeled(hookRepo, bug, "wrench", owner))
	if r.Code != http.StatusBadRequest || !strings.Contains(r.Reason, "limits.max_turns") || len(q.submitted()) != 0 {
		t.Errorf("answer %+v, %d queued", r, len(q.submitted()))
	}
}

// A payload naming a repository GitHub could not have ("../..") is a 400.
func TestHostileWebhook_FullNameMustBeARepository(t *testing.T) {
	for _, full := range []string{"../..", "acme/..", "acme/.", "-x/calc", "acme/ca lc"} {
		q := &fakeQueue{}
		h := newHook(t, q, nil)
		repo := hookRepo
		repo.Owner, repo.Name, _ = strings.Cut(full, "/")
		repo.CloneURL = "https://github.com/" + full + ".git"
		r := deliver(t, h, "issues", "d-"+full, githubtest.IssueLabeled(repo, bug, "wrench", owner))
		if r.Code != http.StatusBadRequest || len(q.submitted()) != 0 {
			t.Errorf("%s: answer %+v, %d queued", full, r, len(q.submitted()))
		}
	}
}
