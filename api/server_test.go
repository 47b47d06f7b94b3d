package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/wrenchworks/wrench/task"
)

const validTask = `{"id":"t-1","repo":{"url":"https://example.com/r.git"},"instruction":"Fix Add."}`

func newTestServer(t *testing.T, f *fakeBackend, mod func(*Config)) *httptest.Server {
	t.Helper()
	cfg := Config{Submitter: f, States: f, Events: f, Artifacts: f, MaxBody: 4096,
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "m 1\n") })}
	if mod != nil {
		mod(&cfg)
	}
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

type answer struct {
	code   int
	header http.Header
	body   string
	err    ErrorBody
}

func call(t *testing.T, srv *httptest.Server, method, path, body string, hdr map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{code: resp.StatusCode, header: resp.Header, body: string(b)}
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(b, &a.err); err != nil {
			t.Errorf("%s %s: error body is not JSON: %q", method, path, b)
		}
	}
	return a
}

func fieldNames(fs []task.FieldError) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Field)
	}
	return out
}

func TestServerRoutes(t *testing.T) {
	f := newFake()
	f.put(task.Status{TaskID: "t-run", State: task.StateRunning})
	f.put(task.Status{TaskID: "t-done", State: task.StateResolved, Result: &task.Result{Status: task.StateResolved, Patch: "--- a\n+++ b\n"}})
	f.put(task.Status{TaskID: "t-art", State: task.StateResolved, Result: &task.Result{Status: task.StateResolved}})
	f.artifacts["t-art/patch.diff"] = []byte("diff from store\n")
	f.put(task.Status{TaskID: "t-nop", State: task.StateUnresolved, Result: &task.Result{Status: task.StateUnresolved}})
	srv := newTestServer(t, f, func(c *Config) {
		c.Ready = func(context.Context) error { return errors.New("nats down") }
	})

	tests := []struct {
		name, method, path, body string
		code                     int
		fields                   []string // the fields at fault, for 400s
		bodyHas                  string
	}{
		{"submit", "POST", "/v1/tasks", validTask, 201, nil, `"state": "queued"`},
		{"duplicate", "POST", "/v1/tasks", validTask, 200, nil, `"task_id": "t-1"`},
		{"missing fields", "POST", "/v1/tasks", `{"repo":{"url":""},"instruction":" "}`, 400, []string{"repo.url", "instruction"}, ""},
		{"bad limits", "POST", "/v1/tasks", `{"repo":{"url":"ftp://x"},"instruction":"x","limits":{"max_turns":-5}}`, 400, []string{"repo.url", "limits.max_turns"}, ""},
		{"unknown field", "POST", "/v1/tasks", `{"repo":{"url":"/r"},"instruction":"x","instructions":"y"}`, 400, []string{"body"}, ""},
		{"not JSON", "POST", "/v1/tasks", `repo=x`, 400, []string{"body"}, ""},
		{"too large", "POST", "/v1/tasks", `{"repo":{"url":"/r"},"instruction":"` + strings.Repeat("x", 5000) + `"}`, 413, nil, "4096"},
		{"status", "GET", "/v1/tasks/t-run", "", 200, nil, `"state": "running"`},
		{"unknown id", "GET", "/v1/tasks/t-nope", "", 404, nil, "t-nope"},
		{"list", "GET", "/v1/tasks?state=running&limit=5", "", 200, nil, `"t-run"`},
		{"list bad query", "GET", "/v1/tasks?state=sleeping&limit=0", "", 400, []string{"state", "limit"}, ""},
		{"list bad cursor", "GET", "/v1/tasks?cursor=bogus", "", 400, []string{"cursor"}, ""},
		{"cancel running", "POST", "/v1/tasks/t-run/cancel", "", 202, nil, `"running"`},
		{"cancel unknown", "POST", "/v1/tasks/t-nope/cancel", "", 404, nil, ""},
		{"patch not final", "GET", "/v1/tasks/t-run/patch", "", 409, nil, "running"},
		{"patch inline", "GET", "/v1/tasks/t-done/patch", "", 200, nil, "+++ b"},
		{"patch from artifact", "GET", "/v1/tasks/t-art/patch", "", 200, nil, "diff from store"},
		{"empty patch", "GET", "/v1/tasks/t-nop/patch", "", 204, nil, ""},
		{"patch unknown", "GET", "/v1/tasks/t-nope/patch", "", 404, nil, ""},
		{"events unknown", "GET", "/v1/tasks/t-nope/events", "", 404, nil, ""},
		{"events bad resume", "GET", "/v1/tasks/t-run/events?after=x", "", 400, []string{"Last-Event-ID"}, ""},
		{"wrong method", "DELETE", "/v1/tasks/t-run", "", 405, nil, ""},
		{"no route", "GET", "/v2/whatever", "", 404, nil, ""},
		{"healthz", "GET", "/healthz", "", 200, nil, "ok"},
		{"readyz", "GET", "/readyz", "", 503, nil, "nats down"},
		{"metrics", "GET", "/metrics", "", 200, nil, "m 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := call(t, srv, tc.method, tc.path, tc.body, nil)
			if a.code != tc.code {
				t.Fatalf("code %d, want %d: %s", a.code, tc.code, a.body)
			}
			if got := fieldNames(a.err.Fields); tc.fields != nil && !slices.Equal(got, tc.fields) {
				t.Errorf("fields %v, want %v", got, tc.fields)
			}
			if !strings.Contains(a.body, tc.bodyHas) {
				t.Errorf("body lacks %q: %s", tc.bodyHas, a.body)
			}
		})
	}
}

func TestServerSubmitDetails(t *testing.T) {
	f := newFake()
	srv := newTestServer(t, f, nil)
	a := call(t, srv, "POST", "/v1/tasks", `{"repo":{"url":"/r"},"instruction":"x"}`, nil)
	if a.code != 201 {
		t.Fatalf("code %d: %s", a.code, a.body)
	}
	var st task.Status
	if err := json.Unmarshal([]byte(a.body), &st); err != nil {
		t.Fatal(err)
	}
	if st.TaskID == "" || a.header.Get("Location") != "/v1/tasks/"+st.TaskID {
		t.Errorf("id %q, Location %q", st.TaskID, a.header.Get("Location"))
	}
	if st.Task.Source.Kind != "api" {
		t.Errorf("source kind %q, want api", st.Task.Source.Kind)
	}
	if a.header.Get("Content-Type") != "application/json" {
		t.Errorf("content type %q", a.header.Get("Content-Type"))
	}

	f.failWith = errors.New("nats: timeout")
	if a := call(t, srv, "POST", "/v1/tasks", validTask, nil); a.code != 500 || strings.Contains(a.body, "nats") {
		t.Errorf("backend failure: %d %s (want 500 without internals)", a.code, a.body)
	}
	f.failWith = context.DeadlineExceeded
	if a := call(t, srv, "GET", "/v1/tasks/t-1", "", nil); a.code != 503 {
		t.Errorf("backend timeout: %d", a.code)
	}
}

// A failed submission answers 503 saying what it left behind and the id to
// submit again; the client reports both.
func TestServerSubmitFailureIsTruthful(t *testing.T) {
	f := newFake()
	srv := newTestServer(t, f, nil)
	c := NewClient(srv.URL, "")
	for _, tc := range []struct {
		kind error
		want string
	}{
		{task.ErrNotQueued, "was not queued"},
		{task.ErrUnconfirmed, "may be queued"},
	} {
		f.failWith = &task.SubmitError{TaskID: "t-srv-chosen", Kind: tc.kind, Err: errors.New("nats: timeout")}
		a := call(t, srv, "POST", "/v1/tasks", validTask, nil)
		var body ErrorBody
		if err := json.Unmarshal([]byte(a.body), &body); err != nil {
			t.Fatal(err)
		}
		if a.code != 503 || body.TaskID != "t-srv-chosen" || !strings.Contains(body.Error, tc.want) || a.header.Get("Retry-After") == "" {
			t.Errorf("%v: %d %+v %v", tc.kind, a.code, body, a.header)
		}
		_, _, err := c.Submit(context.Background(), task.Task{Repo: task.Repo{URL: "/r"}, Instruction: "x"})
		var ae *Error
		if !errors.As(err, &ae) || !errors.Is(err, ErrUnavailable) || ae.TaskID != "t-srv-chosen" {
			t.Errorf("%v: client error %v", tc.kind, err)
		}
	}
}

func TestServerAuth(t *testing.T) {
	f := newFake()
	f.put(task.Status{TaskID: "t-1", State: task.StateQueued})
	srv := newTestServer(t, f, func(c *Config) { c.Token = "s3cret" })
	tests := []struct {
		name, path, auth string
		code             int
	}{
		{"no token", "/v1/tasks/t-1", "", 401},
		{"wrong token", "/v1/tasks/t-1", "Bearer nope", 401},
		{"wrong scheme", "/v1/tasks/t-1", "Basic s3cret", 401},
		{"prefix of token", "/v1/tasks/t-1", "Bearer s3cre", 401},
		{"right token", "/v1/tasks/t-1", "Bearer s3cret", 200},
		{"scheme in lower case", "/v1/tasks/t-1", "bearer s3cret", 200},
		{"scheme in upper case", "/v1/tasks/t-1", "BEARER s3cret", 200},
		{"scheme glued to the token", "/v1/tasks/t-1", "Bearers3cret", 401},
		{"unknown id still needs auth", "/v1/tasks/t-2", "", 401},
		{"events need auth", "/v1/tasks/t-1/events", "", 401},
		{"healthz is open", "/healthz", "", 200},
		{"metrics is open", "/metrics", "", 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tc.auth != "" {
				hdr["Authorization"] = tc.auth
			}
			a := call(t, srv, "GET", tc.path, "", hdr)
			if a.code != tc.code {
				t.Fatalf("code %d, want %d", a.code, tc.code)
			}
			if a.code == 401 && !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without WWW-Authenticate: %v", a.header)
			}
		})
	}
}

func TestServerTraceContextReachesBackend(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	f := newFake()
	srv := newTestServer(t, f, func(c *Config) { c.TracerProvider = tp })
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	a := call(t, srv, "POST", "/v1/tasks", validTask,
		map[string]string{"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"})
	if a.code != 201 {
		t.Fatal(a.body)
	}
	if got := f.lastSpan.TraceID().String(); got != traceID {
		t.Errorf("backend saw trace %s, want the caller's %s", got, traceID)
	}
	spans := rec.Ended()
	if len(spans) != 1 || spans[0].Name() != "POST /v1/tasks" {
		t.Fatalf("spans %v", spans)
	}
	if spans[0].Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("server span parent %s", spans[0].Parent().SpanID())
	}
}

func TestServerObserveRequest(t *testing.T) {
	type obs struct {
		route  string
		code   int
		stream bool
	}
	var (
		mu  sync.Mutex
		got []obs
	)
	f := newFake()
	f.put(task.Status{TaskID: "t-1", State: task.StateResolved})
	f.emit(task.Event{TaskID: "t-1", Kind: task.EventResult, Result: &task.Result{Status: task.StateResolved}})
	srv := newTestServer(t, f, func(c *Config) {
		c.ObserveRequest = func(route string, code int, _ time.Duration, stream bool) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, obs{route, code, stream})
		}
	})
	call(t, srv, "GET", "/v1/tasks/t-1", "", nil)
	call(t, srv, "GET", "/v1/tasks/t-1/events", "", nil)
	call(t, srv, "GET", "/nope", "", nil)
	want := []obs{{"GET /v1/tasks/{id}", 200, false}, {"GET /v1/tasks/{id}/events", 200, true}, {"", 404, false}}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, want) {
		t.Errorf("observed %v, want %v", got, want)
	}
}

func TestServerHandleExtraRoute(t *testing.T) {
	s, err := NewServer(Config{Submitter: newFake(), States: newFake(), Events: newFake(), Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	s.Handle("POST /webhooks/github", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusAccepted)
	}))
	srv := httptest.NewServer(s)
	defer srv.Close()
	if a := call(t, srv, "POST", "/webhooks/github", "{}", nil); a.code != http.StatusAccepted {
		t.Errorf("mounted route answered %d (it does its own auth, not the bearer token)", a.code)
	}
	if a := call(t, srv, "GET", "/webhooks/github", "", nil); a.code != http.StatusMethodNotAllowed {
		t.Errorf("wrong method on mounted route: %d", a.code)
	}
}

// TestProbesAreNotTraced: scrapes and health probes (including routes
// mounted under /readyz/) make no spans; task routes still do.
func TestProbesAreNotTraced(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	s, err := NewServer(Config{Submitter: newFake(), States: newFake(), Events: newFake(), TracerProvider: tp,
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "m 1\n") })})
	if err != nil {
		t.Fatal(err)
	}
	s.Handle("GET /readyz/worker", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	srv := httptest.NewServer(s)
	defer srv.Close()
	for _, p := range []string{"/healthz", "/readyz", "/readyz/worker", "/metrics"} {
		if a := call(t, srv, "GET", p, "", nil); a.code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", p, a.code, a.body)
		}
	}
	if spans := rec.Ended(); len(spans) != 0 {
		t.Errorf("probes made %d spans, first %q", len(spans), spans[0].Name())
	}
	call(t, srv, "GET", "/v1/tasks/nope", "", nil)
	if spans := rec.Ended(); len(spans) != 1 || spans[0].Name() != "GET /v1/tasks/{id}" {
		t.Errorf("task route spans %v", spans)
	}
}
