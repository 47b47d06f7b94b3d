package llm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/llm"
	"github.com/wrenchworks/wrench/llm/scripted"
)

var userMsg = []agent.Message{{Role: agent.RoleUser, Content: "go"}}

func TestClient_Faults(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name     string
		step     string // one script step
		cfg      func(*llm.Config)
		wantKind agent.ModelErrorKind // "" means success
		wantReqs int
		// wantSleeps are the waits between attempts (backoff is 1ms·2^n
		// without jitter in these tests).
		wantSleeps []time.Duration
		check      func(t *testing.T, resp agent.ModelResponse, err error)
	}{
		{name: "429 honours Retry-After", step: `{content: ok, fault: {status: 429, retry_after: 1, times: 2}}`,
			wantReqs: 3, wantSleeps: []time.Duration{time.Second, time.Second}},
		{name: "503 backs off", step: `{content: ok, fault: {status: 503, times: 3}}`,
			wantReqs: 4, wantSleeps: []time.Duration{ms, 2 * ms, 4 * ms}},
		{name: "500 until retries run out", step: `{content: ok, fault: {status: 500, times: 9}}`,
			cfg: func(c *llm.Config) { c.MaxRetries = 2 }, wantKind: agent.ModelServer, wantReqs: 3, wantSleeps: []time.Duration{ms, 2 * ms}},
		{name: "no retries when disabled", step: `{content: ok, fault: {status: 502}}`,
			cfg: func(c *llm.Config) { c.MaxRetries = -1 }, wantKind: agent.ModelServer, wantReqs: 1},
		{name: "Retry-After beyond the limit ends the call", step: `{content: ok, fault: {status: 429, retry_after: 600}}`,
			wantKind: agent.ModelRateLimited, wantReqs: 1,
			check: func(t *testing.T, _ agent.ModelResponse, err error) {
				var me *agent.ModelError
				if errors.As(err, &me); me.RetryAfter != 600*time.Second || me.Status != 429 {
					t.Errorf("error = %+v, want RetryAfter 10m", me)
				}
			}},
		{name: "Retry-After as HTTP date", step: `{content: ok, fault: {status: 503, retry_after: "Mon, 02 Jan 2006 15:04:05 GMT"}}`,
			wantReqs: 2, wantSleeps: []time.Duration{ms}}, // a date in the past: plain backoff
		{name: "400 is not retried", step: `{content: ok, fault: {status: 400, times: 3}}`, wantKind: agent.ModelBadRequest, wantReqs: 1},
		{name: "401 is not retried", step: `{content: ok, fault: {status: 401, times: 3}}`, wantKind: agent.ModelAuth, wantReqs: 1},
		{name: "403 is not retried", step: `{content: ok, fault: {status: 403, times: 3}}`, wantKind: agent.ModelAuth, wantReqs: 1},
		{name: "408 is a timeout", step: `{content: ok, fault: {status: 408}}`, wantReqs: 2, wantSleeps: []time.Duration{ms}},
		// A bad response is as transient as a 5xx (one such reply used to
		// fail the task).
		{name: "no choices is retried", step: `{content: ok, fault: {kind: no_choices}}`, wantReqs: 2, wantSleeps: []time.Duration{ms}},
		{name: "cut stream is retried", step: `{content: "a reply long enough to be cut in half", fault: {kind: cut_stream}}`,
			wantReqs: 2, wantSleeps: []time.Duration{ms},
			check: func(t *testing.T, resp agent.ModelResponse, _ error) {
				if resp.Message.Content != "a reply long enough to be cut in half" {
					t.Errorf("content = %q, want the whole reply once", resp.Message.Content)
				}
			}},
		{name: "garbage is retried", step: `{content: ok, fault: {kind: garbage}}`, wantReqs: 2, wantSleeps: []time.Duration{ms}},
		{name: "empty body is retried", step: `{content: ok, fault: {kind: empty}}`, wantReqs: 2, wantSleeps: []time.Duration{ms}},
		{name: "garbage until retries run out", step: `{content: ok, fault: {kind: garbage, times: 9}}`,
			wantKind: agent.ModelBadResponse, wantReqs: 4, wantSleeps: []time.Duration{ms, 2 * ms, 4 * ms}},
		{name: "missing call id", step: `{tool_calls: [{name: bash, arguments: {command: ls}}], fault: {kind: missing_call_id, times: 9}}`,
			cfg: func(c *llm.Config) { c.MaxRetries = -1 }, wantKind: agent.ModelBadResponse, wantReqs: 1,
			check: func(t *testing.T, _ agent.ModelResponse, err error) {
				if !strings.Contains(err.Error(), "no id") {
					t.Errorf("err = %v", err)
				}
			}},
		{name: "missing call id generated", step: `{tool_calls: [{name: bash, arguments: {command: ls}}], fault: {kind: missing_call_id}}`,
			cfg: func(c *llm.Config) { c.GenerateMissingCallIDs = true }, wantReqs: 1,
			check: func(t *testing.T, resp agent.ModelResponse, _ error) {
				if id := resp.Message.ToolCalls[0].ID; !strings.HasPrefix(id, "call_wrench_") {
					t.Errorf("generated id = %q", id)
				}
			}},
		{name: "bad JSON arguments pass through", step: `{tool_calls: [{name: bash, arguments: {command: "go test ./..."}}], fault: {kind: bad_json_args}}`,
			wantReqs: 1,
			check: func(t *testing.T, resp agent.ModelResponse, _ error) {
				tc := resp.Message.ToolCalls[0]
				if json.Valid([]byte(tc.Arguments)) || !strings.HasPrefix(`{"command":"go test ./..."}`, tc.Arguments) || tc.ID == "" {
					t.Errorf("call = %+v, want truncated arguments", tc)
				}
			}},
		{name: "slow reply times out and is retried", step: `{content: ok, fault: {delay: 5s}}`,
			cfg: func(c *llm.Config) { c.RequestTimeout = 100 * ms }, wantReqs: 2, wantSleeps: []time.Duration{ms}},
		{name: "slow reply times out", step: `{content: ok, fault: {delay: 5s}}`,
			cfg: func(c *llm.Config) { c.RequestTimeout = 100 * ms; c.MaxRetries = -1 }, wantKind: agent.ModelTimeout, wantReqs: 1},
	}
	for _, mode := range []string{"stream", "plain"} {
		for _, tt := range tests {
			t.Run(mode+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				srv := startScript(t, "steps:\n  - "+tt.step+"\n")
				c, sl := newClient(t, srv.URL(), func(cfg *llm.Config) {
					cfg.NoStream = mode == "plain"
					if tt.cfg != nil {
						tt.cfg(cfg)
					}
				})
				var d deltas
				resp, err := c.Chat(context.Background(), agent.ModelRequest{Messages: userMsg}, d.on)
				if tt.wantKind == "" && err != nil {
					t.Fatalf("err = %v, want success", err)
				}
				if tt.wantKind != "" && !agent.IsModelError(err, tt.wantKind) {
					t.Fatalf("err = %v, want kind %s", err, tt.wantKind)
				}
				if n := len(srv.Requests()); n != tt.wantReqs {
					t.Errorf("%d requests, want %d", n, tt.wantReqs)
				}
				if got := sl.list(); !reflect.DeepEqual(got, tt.wantSleeps) && (len(got) != 0 || len(tt.wantSleeps) != 0) {
					t.Errorf("sleeps = %v, want %v", got, tt.wantSleeps)
				}
				if tt.check != nil {
					tt.check(t, resp, err)
				}
			})
		}
	}
}

// After malformed arguments, the agent's error observation goes back and
// the step's real reply follows.
func TestClient_BadJSONArgsThenRealReply(t *testing.T) {
	srv := startScript(t, "steps:\n  - {tool_calls: [{name: bash, arguments: {command: ls}}], fault: {kind: bad_json_args}}\n")
	c, _ := newClient(t, srv.URL(), nil)
	resp, err := c.Chat(context.Background(), agent.ModelRequest{Messages: userMsg}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tc := resp.Message.ToolCalls[0]
	msgs := append(append([]agent.Message{}, userMsg...), resp.Message,
		agent.Message{Role: agent.RoleTool, ToolCallID: tc.ID, Content: "error: arguments are not valid JSON"})
	resp, err = c.Chat(context.Background(), agent.ModelRequest{Messages: msgs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Message.ToolCalls[0]; got.Arguments != `{"command":"ls"}` || got.ID == tc.ID {
		t.Errorf("second reply call = %+v (first id %s)", got, tc.ID)
	}
}

// A stream cut after deltas went out is retried too; the caller gets a
// StreamRetry event between the void partial reply and the next attempt.
func TestClient_StreamTimeoutRetriedAfterDeltas(t *testing.T) {
	var calls atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"x","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"partial"}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // then hang until the client gives up
	}))
	defer ts.Close()
	c, _ := newClient(t, ts.URL, func(c *llm.Config) { c.RequestTimeout, c.MaxRetries = 100*time.Millisecond, 1 })
	var kinds []agent.StreamEventKind
	_, err := c.Chat(context.Background(), agent.ModelRequest{Messages: userMsg}, func(ev agent.StreamEvent) { kinds = append(kinds, ev.Kind) })
	want := []agent.StreamEventKind{agent.StreamText, agent.StreamRetry, agent.StreamText}
	if !agent.IsModelError(err, agent.ModelTimeout) || calls.Load() != 2 || !reflect.DeepEqual(kinds, want) {
		t.Fatalf("err = %v, %d calls, deltas %v (want %v)", err, calls.Load(), kinds, want)
	}
}

// An error event at the start of a stream is a server error and is retried.
func TestClient_StreamErrorEvent(t *testing.T) {
	var calls atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		if calls.Add(1) == 1 {
			fmt.Fprint(w, "data: {\"error\": {\"message\": \"overloaded\"}}\n\n")
			return
		}
		fmt.Fprint(w, `data: {"id":"x","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"hi","reasoning":"via reasoning"},"finish_reason":"stop"}]}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer ts.Close()
	c, sl := newClient(t, ts.URL, nil)
	var d deltas
	resp, err := c.Chat(context.Background(), agent.ModelRequest{Messages: userMsg}, d.on)
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 2 || len(sl.list()) != 1 || resp.Message.Content != "hi" || resp.Message.Thinking != "via reasoning" {
		t.Errorf("calls %d sleeps %v resp %+v", calls.Load(), sl.list(), resp)
	}
	c, _ = newClient(t, ts.URL, func(c *llm.Config) { c.MaxRetries = -1 })
	calls.Store(0)
	_, err = c.Chat(context.Background(), agent.ModelRequest{Messages: userMsg}, nil)
	if !agent.IsModelError(err, agent.ModelServer) || !strings.Contains(err.Error(), "overloaded") {
		t.Errorf("err = %v", err)
	}
}

func TestClient_NetworkErrorsAreRetried(t *testing.T) {
	srv := startScript(t, "steps: []\n")
	url := srv.URL()
	_ = srv.Close()
	c, sl := newClient(t, url, func(c *llm.Config) { c.MaxRetries = 2 })
	_, err := c.Chat(context.Background(), agent.ModelRequest{Messages: userMsg}, nil)
	if !agent.IsModelError(err, agent.ModelNetwork) || len(sl.list()) != 2 {
		t.Errorf("err = %v, sleeps %v", err, sl.list())
	}
}

func TestClient_ContextEndsDuringBackoff(t *testing.T) {
	srv := startScript(t, "steps:\n  - {content: ok, fault: {status: 503, times: 5}}\n")
	c, _ := newClient(t, srv.URL(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	llm.SetRetryHooks(c, func(ctx context.Context, d time.Duration) error {
		cancel()
		return ctx.Err()
	}, func(d time.Duration) time.Duration { return d })
	_, err := c.Chat(ctx, agent.ModelRequest{Messages: userMsg}, nil)
	var me *agent.ModelError
	if !errors.Is(err, context.Canceled) || errors.As(err, &me) {
		t.Errorf("err = %v, want the context's error, not a ModelError", err)
	}
}

func TestClient_APIKeyIsSentButNeverLogged(t *testing.T) {
	const key = "sk-test-Zr8q2LmS3cr3t"
	srv := startScript(t, `
steps:
  - content: ok
    fault: {status: 429, retry_after: 0, message: "key `+key+` is over its quota"}
  - content: ok
    fault: {status: 400, message: "bad request for key `+key+`"}
`, scripted.WithAPIKey(key))
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, _ := newClient(t, srv.URL(), func(c *llm.Config) { c.APIKey, c.Logger = key, logger })

	resp, err := c.Chat(context.Background(), agent.ModelRequest{Messages: userMsg}, nil)
	if err != nil || resp.Message.Content != "ok" {
		t.Fatalf("with the key: %v %+v", err, resp)
	}
	msgs := append(append([]agent.Message{}, userMsg...), resp.Message, agent.Message{Role: agent.RoleUser, Content: "again"})
	_, err = c.Chat(context.Background(), agent.ModelRequest{Messages: msgs}, nil)
	if !agent.IsModelError(err, agent.ModelBadRequest) {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "[REDACTED]") {
		t.Errorf("error text leaks or loses the key: %v", err)
	}
	if !strings.Contains(logs.String(), "retrying") || !strings.Contains(logs.String(), "model call") {
		t.Errorf("expected retry and call lines in the log:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), key) {
		t.Errorf("the log contains the API key:\n%s", logs.String())
	}

	wrong, sl := newClient(t, srv.URL(), func(c *llm.Config) { c.APIKey = "sk-wrong" })
	n := len(srv.Requests())
	_, err = wrong.Chat(context.Background(), agent.ModelRequest{Messages: userMsg}, nil)
	if !agent.IsModelError(err, agent.ModelAuth) || len(srv.Requests()) != n+1 || len(sl.list()) != 0 {
		t.Errorf("wrong key: err = %v, %d requests, sleeps %v", err, len(srv.Requests())-n, sl.list())
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 4, 0, 0, time.UTC)
	tests := []struct {
		headers map[string]string
		want    time.Duration
	}{
		{nil, 0},
		{map[string]string{"Retry-After": "3"}, 3 * time.Second},
		{map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
		{map[string]string{"Retry-After": "Fri, 02 Jan 2026 15:04:30 GMT"}, 30 * time.Second},
		{map[string]string{"Retry-After": "Fri, 02 Jan 2026 15:00:00 GMT"}, 0},
		{map[string]string{"Retry-After": "-4"}, 0},
		{map[string]string{"Retry-After": "soon"}, 0},
		{map[string]string{"Retry-After-Ms": "250", "Retry-After": "9"}, 250 * time.Millisecond},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.headers {
			h.Set(k, v)
		}
		if got := llm.RetryAfter(h, now); got != tt.want {
			t.Errorf("RetryAfter(%v) = %v, want %v", tt.headers, got, tt.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	c, err := llm.New(llm.Config{BaseURL: "http://127.0.0.1:1/v1", BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		want *= time.Millisecond
		// Equal jitter: between half and all of the exponential step.
		for i := 0; i < 20; i++ {
			if got := llm.Backoff(c, n); got < want/2 || got > want {
				t.Fatalf("Backoff(%d) = %v, want in [%v, %v]", n, got, want/2, want)
			}
		}
	}
}

// A stream that ends cleanly but before a finish reason is cut short too.
func TestClient_StreamEndsWithoutFinish(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"x","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"partial"}}]}`+"\n\n")
	}))
	defer ts.Close()
	c, _ := newClient(t, ts.URL, nil)
	_, err := c.Chat(context.Background(), agent.ModelRequest{Messages: userMsg}, nil)
	if !agent.IsModelError(err, agent.ModelBadResponse) || !strings.Contains(err.Error(), "finish reason") {
		t.Errorf("err = %v", err)
	}
}
