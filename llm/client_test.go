package llm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/llm"
	"github.com/wrenchworks/wrench/llm/scripted"
)

// sleeps records the waits between attempts instead of sleeping.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = append(s.d, d)
	return ctx.Err()
}

func (s *sleeps) list() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

func newClient(t *testing.T, baseURL string, mod func(*llm.Config)) (*llm.Client, *sleeps) {
	t.Helper()
	cfg := llm.Config{BaseURL: baseURL, Model: "test-model", BackoffBase: time.Millisecond, BackoffMax: 8 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	c, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := &sleeps{}
	llm.SetRetryHooks(c, s.sleep, func(d time.Duration) time.Duration { return d })
	return c, s
}

func startScript(t *testing.T, y string, opts ...scripted.Option) *scripted.Server {
	t.Helper()
	return startB(t, mustParseB(t, y), opts...)
}

func loadScript(t *testing.T, path string) *scripted.Server {
	t.Helper()
	s, err := scripted.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return startB(t, s)
}

var tools = []agent.ToolSpec{
	{Name: "bash", Description: "run a command", Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)},
	{Name: "edit", Description: "edit a file", Parameters: json.RawMessage(`{"type":"object"}`)},
	{Name: "finish", Description: "end", Parameters: json.RawMessage(`{"type":"object"}`)},
}

// deltas reassembles what onDelta saw.
type deltas struct {
	text, thinking string
	starts, ends   []agent.StreamEvent
	args           map[int]string
	n              int
}

func (d *deltas) on(ev agent.StreamEvent) {
	d.n++
	switch ev.Kind {
	case agent.StreamText:
		d.text += ev.Text
	case agent.StreamThinking:
		d.thinking += ev.Text
	case agent.StreamToolCallStart:
		d.starts = append(d.starts, ev)
	case agent.StreamToolCallArgs:
		if d.args == nil {
			d.args = map[int]string{}
		}
		d.args[ev.Index] += ev.Text
	case agent.StreamToolCallEnd:
		d.ends = append(d.ends, ev)
	}
}

func TestClient_ScriptRoundTrip(t *testing.T) {
	for _, mode := range []struct {
		name     string
		noStream bool
	}{{"stream", false}, {"plain", true}} {
		t.Run(mode.name, func(t *testing.T) {
			srv := loadScript(t, "scripted/testdata/fix_add.yaml")
			c, _ := newClient(t, srv.URL(), func(cfg *llm.Config) { cfg.NoStream = mode.noStream })
			ctx := context.Background()
			msgs := []agent.Message{
				{Role: agent.RoleSystem, Content: "You fix bugs."},
				{Role: agent.RoleUser, Content: "Fix Add."},
			}
			observe := []string{"--- FAIL: TestAdd", "edited calc.go", "finished"}
			wantTools := []string{"bash", "edit", "finish"}
			for i, want := range wantTools {
				var d deltas
				resp, err := c.Chat(ctx, agent.ModelRequest{Messages: msgs, Tools: tools}, d.on)
				if err != nil {
					t.Fatalf("turn %d: %v", i+1, err)
				}
				m := resp.Message
				if resp.FinishReason != agent.FinishToolCalls || len(m.ToolCalls) != 1 || m.ToolCalls[0].Name != want {
					t.Fatalf("turn %d: reply %+v finish %s", i+1, m, resp.FinishReason)
				}
				tc := m.ToolCalls[0]
				if tc.ID == "" || !json.Valid([]byte(tc.Arguments)) {
					t.Errorf("turn %d: call %+v", i+1, tc)
				}
				if resp.Usage.InputTokens == 0 || resp.Usage.OutputTokens == 0 || resp.Model != "test-model" {
					t.Errorf("turn %d: usage %+v model %q", i+1, resp.Usage, resp.Model)
				}
				if d.text != m.Content || d.thinking != m.Thinking || d.args[0] != tc.Arguments {
					t.Errorf("turn %d: deltas %+v do not add up to %+v", i+1, d, m)
				}
				if len(d.starts) != 1 || d.starts[0].ID != tc.ID || d.starts[0].Name != want || len(d.ends) != 1 {
					t.Errorf("turn %d: tool-call events %+v %+v", i+1, d.starts, d.ends)
				}
				if i == 0 {
					if m.Content != "Run the tests first." || m.Thinking != "The bug is probably in calc.go." || tc.Arguments != `{"command":"go test ./..."}` {
						t.Errorf("first reply = %+v", m)
					}
					if !mode.noStream && d.n < 6 {
						t.Errorf("stream delivered only %d deltas", d.n)
					}
				}
				msgs = append(msgs, m, agent.Message{Role: agent.RoleTool, ToolCallID: tc.ID, Content: observe[i]})
			}
			resp, err := c.Chat(ctx, agent.ModelRequest{Messages: msgs, Tools: tools}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.FinishReason != agent.FinishStop || len(resp.Message.ToolCalls) != 0 || resp.Message.Content != scripted.DefaultFinal {
				t.Errorf("after the script: %+v", resp)
			}
			reqs := srv.Requests()
			if len(reqs) != 4 || srv.Step() != 3 {
				t.Fatalf("server saw %d requests, step %d", len(reqs), srv.Step())
			}
			for _, r := range reqs {
				if r.Stream == mode.noStream || strings.Join(r.Tools, ",") != "bash,edit,finish" || r.Model != "test-model" {
					t.Errorf("request %+v", r)
				}
			}
		})
	}
}

func TestClient_ExpectObservationMismatchNamesTheStep(t *testing.T) {
	srv := loadScript(t, "scripted/testdata/fix_add.yaml")
	c, sl := newClient(t, srv.URL(), nil)
	msgs := []agent.Message{{Role: agent.RoleUser, Content: "Fix Add."}}
	resp, err := c.Chat(context.Background(), agent.ModelRequest{Messages: msgs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tc := resp.Message.ToolCalls[0]
	msgs = append(msgs, resp.Message, agent.Message{Role: agent.RoleTool, ToolCallID: tc.ID, Content: "ok  all tests pass"})
	_, err = c.Chat(context.Background(), agent.ModelRequest{Messages: msgs}, nil)
	var me *agent.ModelError
	if !errors.As(err, &me) || me.Kind != agent.ModelServer || me.Status != 500 {
		t.Fatalf("err = %v, want a 500 ModelError", err)
	}
	if !strings.Contains(err.Error(), "step 2") || !strings.Contains(err.Error(), "expect_observation") {
		t.Errorf("err = %v, want it to name step 2", err)
	}
	if n := len(srv.Requests()); n != 2 || len(sl.list()) != 0 {
		t.Errorf("%d requests, sleeps %v: a diverged script must not be retried", n, sl.list())
	}
}

func TestClient_RequestEncoding(t *testing.T) {
	h := scripted.NewHandler(mustParse(t, "steps: [{content: hi}, {content: again}, {content: more}]\n"))
	var mu sync.Mutex
	var bodies []map[string]any
	var auth []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(data, &m)
		mu.Lock()
		bodies = append(bodies, m)
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(data))
		h.ServeHTTP(w, r)
	}))
	defer ts.Close()
	temp := 0.2
	req := agent.ModelRequest{
		Model:       "other-model",
		Messages:    []agent.Message{{Role: agent.RoleUser, Content: "x"}, {Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "c1", Name: "bash", Arguments: `{"command": "ls"`}}}, {Role: agent.RoleTool, ToolCallID: "c1", Content: "invalid JSON"}},
		Tools:       tools[:1],
		MaxTokens:   100,
		Temperature: &temp,
	}
	for _, mod := range []func(*llm.Config){
		nil,
		func(c *llm.Config) { c.LegacyMaxTokens, c.APIKey = true, "k1" },
		func(c *llm.Config) { c.NoStream = true },
	} {
		c, _ := newClient(t, ts.URL+"/v1", mod)
		if _, err := c.Chat(context.Background(), req, nil); err != nil {
			t.Fatal(err)
		}
	}
	b := bodies[0]
	if b["model"] != "other-model" || b["stream"] != true || b["max_completion_tokens"] != float64(100) || b["temperature"] != 0.2 {
		t.Errorf("streaming body = %v", b)
	}
	if so, _ := b["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Errorf("stream_options = %v", b["stream_options"])
	}
	tool := b["tools"].([]any)[0].(map[string]any)["function"].(map[string]any)
	if tool["name"] != "bash" || tool["description"] != "run a command" || tool["parameters"].(map[string]any)["type"] != "object" {
		t.Errorf("tool = %v", tool)
	}
	if bodies[1]["max_tokens"] != float64(100) || bodies[1]["max_completion_tokens"] != nil {
		t.Errorf("legacy body = %v", bodies[1])
	}
	if _, ok := bodies[2]["stream_options"]; ok || bodies[2]["stream"] == true {
		t.Errorf("non-streaming body = %v", bodies[2])
	}
	if auth[0] != "" || auth[1] != "Bearer k1" {
		t.Errorf("authorization headers = %q", auth)
	}
	// Invalid arguments in the history are sent as "{}".
	if got := h.Requests()[0].Messages[1].ToolCalls[0].Arguments; got != "{}" {
		t.Errorf("history arguments sent as %q, want {}", got)
	}
}

func TestClient_InvalidRequestsAreNotSent(t *testing.T) {
	srv := startScript(t, "steps: [{content: hi}]\n")
	c, _ := newClient(t, srv.URL(), nil)
	for _, req := range []agent.ModelRequest{
		{Messages: []agent.Message{{Role: "robot", Content: "x"}}},
		{Messages: []agent.Message{{Role: agent.RoleTool, Content: "x"}}},
		{Messages: []agent.Message{{Role: agent.RoleUser, Content: "x"}}, Tools: []agent.ToolSpec{{Name: "t", Parameters: json.RawMessage(`{`)}}},
	} {
		_, err := c.Chat(context.Background(), req, nil)
		if !agent.IsModelError(err, agent.ModelBadRequest) {
			t.Errorf("err = %v, want bad_request", err)
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

func TestNew_RejectsBadBaseURL(t *testing.T) {
	for _, u := range []string{"", "localhost:8080", "ftp://x/v1", "http://"} {
		if _, err := llm.New(llm.Config{BaseURL: u}); err == nil {
			t.Errorf("New(%q): no error", u)
		}
	}
}

func mustParse(t *testing.T, y string) *scripted.Script { return mustParseB(t, y) }

func mustParseB(tb testing.TB, y string) *scripted.Script {
	tb.Helper()
	s, err := scripted.Parse([]byte(y))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func startB(tb testing.TB, s *scripted.Script, opts ...scripted.Option) *scripted.Server {
	tb.Helper()
	srv, err := scripted.Start(context.Background(), s, "", opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = srv.Close() })
	return srv
}
