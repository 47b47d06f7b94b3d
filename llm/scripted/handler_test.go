package scripted_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/wrenchworks/wrench/llm/scripted"
)

func mustParse(t *testing.T, y string) *scripted.Script {
	t.Helper()
	s, err := scripted.Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func serve(t *testing.T, y string, opts ...scripted.Option) (*scripted.Handler, string) {
	t.Helper()
	h := scripted.NewHandler(mustParse(t, y), opts...)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv.URL + "/v1"
}

type msg = map[string]any

func post(t *testing.T, base string, body msg) (*http.Response, []byte) {
	t.Helper()
	data, _ := json.Marshal(body)
	resp, err := http.Post(base+"/chat/completions", "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, out
}

func userReq(stream bool, msgs ...msg) msg {
	if len(msgs) == 0 {
		msgs = []msg{{"role": "user", "content": "fix it"}}
	}
	return msg{"model": "m", "messages": msgs, "stream": stream, "stream_options": msg{"include_usage": true}}
}

func TestHandler_PlainReply(t *testing.T) {
	h, base := serve(t, `
steps:
  - content: "Run the tests."
    thinking: "think"
    tool_calls: [{name: bash, arguments: {command: "go test ./..."}}]
`)
	resp, body := post(t, base, userReq(false))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var got struct {
		Model   string
		Choices []struct {
			FinishReason string `json:"finish_reason"`
			Message      struct {
				Content          string
				ReasoningContent string `json:"reasoning_content"`
				ToolCalls        []struct {
					ID       string
					Type     string
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
		}
		Usage struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		}
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	c := got.Choices[0]
	if got.Model != "m" || c.FinishReason != "tool_calls" || c.Message.Content != "Run the tests." || c.Message.ReasoningContent != "think" {
		t.Errorf("reply = %s", body)
	}
	tc := c.Message.ToolCalls[0]
	if tc.ID != "call_1_0" || tc.Type != "function" || tc.Function.Name != "bash" || tc.Function.Arguments != `{"command":"go test ./..."}` {
		t.Errorf("tool call = %+v", tc)
	}
	if got.Usage.PromptTokens == 0 || got.Usage.CompletionTokens == 0 {
		t.Errorf("usage = %+v, want an estimate", got.Usage)
	}
	if h.Step() != 1 {
		t.Errorf("Step() = %d, want 1", h.Step())
	}
	reqs := h.Requests()
	if len(reqs) != 1 || reqs[0].Step != 1 || reqs[0].Outcome != "reply" || reqs[0].Messages[0].Content != "fix it" {
		t.Errorf("Requests() = %+v", reqs)
	}
}

// sseData returns the data payloads of an event stream.
func sseData(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func TestHandler_StreamReply(t *testing.T) {
	_, base := serve(t, `
steps:
  - content: "Some text that spans several chunks."
    thinking: "Reasoning that also spans chunks."
    tool_calls:
      - {name: bash, arguments: {command: "go test ./... -run TestSomethingLong"}}
      - {name: view, arguments: {path: "calc.go"}}
    usage: {input_tokens: 7, output_tokens: 9}
`, scripted.WithChunkSize(5))
	resp, body := post(t, base, userReq(true))
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	data := sseData(t, body)
	if data[len(data)-1] != "[DONE]" {
		t.Fatalf("last event %q, want [DONE]", data[len(data)-1])
	}
	var content, thinking, finish string
	args := map[int]string{}
	ids := map[int]string{}
	var usage msg
	for _, d := range data[:len(data)-1] {
		var ch struct {
			Choices []struct {
				Delta struct {
					Content          string
					ReasoningContent string `json:"reasoning_content"`
					ToolCalls        []struct {
						Index    int
						ID       string
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				}
				FinishReason *string `json:"finish_reason"`
			}
			Usage msg
		}
		if err := json.Unmarshal([]byte(d), &ch); err != nil {
			t.Fatalf("chunk %q: %v", d, err)
		}
		if ch.Usage != nil {
			usage = ch.Usage
		}
		for _, c := range ch.Choices {
			content += c.Delta.Content
			thinking += c.Delta.ReasoningContent
			for _, tc := range c.Delta.ToolCalls {
				args[tc.Index] += tc.Function.Arguments
				if tc.ID != "" {
					ids[tc.Index] = tc.ID
				}
			}
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
	}
	if content != "Some text that spans several chunks." || thinking != "Reasoning that also spans chunks." {
		t.Errorf("content %q thinking %q", content, thinking)
	}
	if args[0] != `{"command":"go test ./... -run TestSomethingLong"}` || args[1] != `{"path":"calc.go"}` {
		t.Errorf("args = %v", args)
	}
	if ids[0] != "call_1_0" || ids[1] != "call_1_1" || finish != "tool_calls" {
		t.Errorf("ids %v finish %q", ids, finish)
	}
	if usage["prompt_tokens"] != float64(7) || usage["completion_tokens"] != float64(9) {
		t.Errorf("usage = %v", usage)
	}
	if len(data) < 15 {
		t.Errorf("only %d events: arguments were not chunked", len(data))
	}
}

func TestHandler_FinalAfterSteps(t *testing.T) {
	h, base := serve(t, "final: done\nsteps:\n  - content: one\n")
	post(t, base, userReq(false))
	for i := 0; i < 2; i++ {
		_, body := post(t, base, userReq(false, msg{"role": "user", "content": "x"}, msg{"role": "assistant", "content": "one"}, msg{"role": "user", "content": "more"}))
		if !strings.Contains(string(body), `"content":"done"`) || !strings.Contains(string(body), `"finish_reason":"stop"`) {
			t.Errorf("reply %d = %s", i, body)
		}
	}
	if reqs := h.Requests(); reqs[2].Outcome != "final" || reqs[2].Step != 0 || h.Step() != 1 {
		t.Errorf("requests = %+v step %d", reqs, h.Step())
	}
}

func TestHandler_ExpectObservation(t *testing.T) {
	y := `
steps:
  - tool_calls: [{name: bash, id: c1, arguments: {command: "go test"}}]
  - expect_observation: "FAIL"
    content: "saw the failure"
`
	call := msg{"role": "assistant", "tool_calls": []msg{{"id": "c1", "type": "function", "function": msg{"name": "bash", "arguments": "{}"}}}}
	t.Run("match", func(t *testing.T) {
		h, base := serve(t, y)
		post(t, base, userReq(false))
		resp, body := post(t, base, userReq(false, msg{"role": "user", "content": "fix"}, call, msg{"role": "tool", "tool_call_id": "c1", "content": "--- FAIL: TestAdd"}))
		if resp.StatusCode != 200 || !strings.Contains(string(body), "saw the failure") {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		if h.Step() != 2 {
			t.Errorf("step = %d", h.Step())
		}
	})
	t.Run("mismatch is sticky", func(t *testing.T) {
		h, base := serve(t, y)
		post(t, base, userReq(false))
		// "FAIL" appears before the last assistant turn only: not an observation.
		for i := 0; i < 2; i++ {
			resp, body := post(t, base, userReq(false, msg{"role": "user", "content": "FAIL"}, call, msg{"role": "tool", "tool_call_id": "c1", "content": "ok all passed"}))
			if resp.StatusCode != 500 || resp.Header.Get("x-should-retry") != "false" {
				t.Fatalf("status %d, x-should-retry %q", resp.StatusCode, resp.Header.Get("x-should-retry"))
			}
			if !strings.Contains(string(body), "step 2") || !strings.Contains(string(body), "ok all passed") {
				t.Errorf("body = %s", body)
			}
		}
		if h.Step() != 1 || h.Requests()[2].Outcome != "diverged" {
			t.Errorf("step %d, requests %+v", h.Step(), h.Requests())
		}
	})
}

func TestHandler_RejectsBadConversations(t *testing.T) {
	_, base := serve(t, "steps: [{content: x}]\n")
	call := msg{"role": "assistant", "tool_calls": []msg{{"id": "c1", "type": "function", "function": msg{"name": "bash", "arguments": "{}"}}}}
	tests := []struct {
		name string
		body msg
		want string
	}{
		{"no model", msg{"messages": []msg{{"role": "user", "content": "x"}}}, "model is required"},
		{"no messages", msg{"model": "m", "messages": []msg{}}, "must not be empty"},
		{"unknown role", userReq(false, msg{"role": "robot", "content": "x"}), "unknown role"},
		{"stray tool message", userReq(false, msg{"role": "user", "content": "x"}, msg{"role": "tool", "tool_call_id": "c9", "content": "x"}), "not a pending tool call"},
		{"unanswered call", userReq(false, msg{"role": "user", "content": "x"}, call, msg{"role": "user", "content": "y"}), "were not answered"},
		{"unanswered at end", userReq(false, msg{"role": "user", "content": "x"}, call), "were not answered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := post(t, base, tt.body)
			if resp.StatusCode != 400 || !strings.Contains(string(body), tt.want) {
				t.Errorf("status %d body %s, want 400 mentioning %q", resp.StatusCode, body, tt.want)
			}
		})
	}
	resp, err := http.Post(base+"/chat/completions", "application/json", strings.NewReader("{not json"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("invalid JSON: status %d", resp.StatusCode)
	}
}

func TestHandler_APIKeyAndRoutes(t *testing.T) {
	h, base := serve(t, "model: named\nsteps: [{content: x}]\n", scripted.WithAPIKey("k-123"))
	req, _ := http.NewRequest("GET", base+"/models", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("no key: status %d", resp.StatusCode)
	}
	req.Header.Set("Authorization", "Bearer k-123")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"id":"named"`) {
		t.Errorf("models: %d %s", resp.StatusCode, body)
	}
	req, _ = http.NewRequest("GET", base+"/nothing", nil)
	req.Header.Set("Authorization", "Bearer k-123")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("unknown route: %d", resp.StatusCode)
	}
	if reqs := h.Requests(); len(reqs) != 1 || reqs[0].Outcome != "unauthorized" {
		t.Errorf("requests = %+v", reqs)
	}
}

// Concurrent requests are served one at a time: each step is played once.
func TestHandler_ConcurrentRequestsPlayEachStepOnce(t *testing.T) {
	var y strings.Builder
	y.WriteString("steps:\n")
	const n = 20
	for i := 0; i < n; i++ {
		fmt.Fprintf(&y, "  - content: step-%d\n", i)
	}
	h, base := serve(t, y.String())
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]int{}
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data, _ := json.Marshal(userReq(i%2 == 0))
			resp, err := http.Post(base+"/chat/completions", "application/json", bytes.NewReader(data))
			if err != nil {
				t.Error(err)
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			for j := 0; j < n; j++ {
				if strings.Contains(string(body), fmt.Sprintf("step-%d\"", j)) {
					seen[fmt.Sprint(j)]++
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != n || h.Step() != n {
		t.Errorf("steps seen %v, Step() %d", seen, h.Step())
	}
	for k, c := range seen {
		if c != 1 {
			t.Errorf("step %s served %d times", k, c)
		}
	}
}

func TestStart_ServesAndCloses(t *testing.T) {
	srv, err := scripted.Start(context.Background(), mustParse(t, "steps: [{content: hi}]\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(srv.URL(), "http://127.0.0.1:") || !strings.HasSuffix(srv.URL(), "/v1") {
		t.Errorf("URL() = %s", srv.URL())
	}
	_, body := post(t, srv.URL(), userReq(false))
	if !strings.Contains(string(body), `"content":"hi"`) {
		t.Errorf("reply = %s", body)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := http.Get(srv.URL() + "/models"); err == nil {
		t.Error("server still answers after Close")
	}
}

func TestServeFile(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	urls := make(chan string, 1)
	go func() {
		errc <- scripted.ServeFile(ctx, "testdata/fix_add.yaml", "127.0.0.1:0", func(u string) { urls <- u })
	}()
	u := <-urls
	resp, body := post(t, u, userReq(false))
	if resp.StatusCode != 200 || !strings.Contains(string(body), "Run the tests first.") {
		t.Errorf("reply %d %s", resp.StatusCode, body)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("ServeFile: %v", err)
	}
	if err := scripted.ServeFile(context.Background(), "testdata/nope.yaml", "", nil); err == nil {
		t.Error("missing script: no error")
	}
}

// A fresh server whose first request continues a conversation that already
// holds two replies plays step 3, then goes on in order.
func TestHandler_ContinuesAConversationBegunElsewhere(t *testing.T) {
	h, base := serve(t, `
steps:
  - content: "one"
  - content: "two"
  - content: "three"
  - content: "four"
`)
	begun := []msg{{"role": "user", "content": "fix it"}, {"role": "assistant", "content": "one"},
		{"role": "user", "content": "go on"}, {"role": "assistant", "content": "two"}, {"role": "user", "content": "go on"}}
	for _, want := range []string{"three", "four"} {
		resp, body := post(t, base, userReq(false, begun...))
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"content":"`+want+`"`) {
			t.Fatalf("reply %d: %s; want %q", resp.StatusCode, body, want)
		}
		begun = append(begun, msg{"role": "assistant", "content": want}, msg{"role": "user", "content": "go on"})
	}
	if h.Step() != 4 {
		t.Errorf("step = %d, want 4", h.Step())
	}
}
