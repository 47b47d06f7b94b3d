package llm_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/llm"
)

// hostile is a model server that answers every request with body: it
// counts the bytes it manages to write, and stops when the client goes.
type hostile struct {
	srv     *httptest.Server
	written atomic.Int64
	reqs    atomic.Int32
}

func startHostile(t *testing.T, status int, contentType string, body func(w io.Writer) error) *hostile {
	t.Helper()
	h := &hostile{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.reqs.Add(1)
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		cw := &countingWriter{w: w, n: &h.written}
		_ = body(cw)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

type countingWriter struct {
	w http.ResponseWriter
	n *atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// forever writes chunk until the client goes away.
func forever(chunk string) func(w io.Writer) error {
	return func(w io.Writer) error {
		for {
			if _, err := io.WriteString(w, chunk); err != nil {
				return err
			}
		}
	}
}

func sseChunk(delta string) string {
	return `data: {"id":"x","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":` + delta + `}]}` + "\n\n"
}

// Each of the hostile review's model attacks ends the attempt at the cap
// (llm.Config.MaxReplyBytes) instead of taking the process's memory: a
// reply that streams forever used to reach 10.8 GB in a minute, 50 MB of
// tool arguments used to be accepted.
func TestHostileModel_RepliesAreBounded(t *testing.T) {
	const small = 64 << 10
	text4k := `{"content":"` + strings.Repeat("a", 4096) + `"}`
	args64k := `{"tool_calls":[{"index":0,"function":{"arguments":"` + strings.Repeat("b", 64<<10) + `"}}]}`
	tests := []struct {
		name        string
		plain       bool
		status      int
		body        func(w io.Writer) error
		max         int64 // MaxReplyBytes; 0: the default
		wantKind    agent.ModelErrorKind
		wantMessage string
		maxWritten  int64
	}{
		{name: "text streams forever", body: forever(sseChunk(text4k)),
			wantKind: agent.ModelBadResponse, wantMessage: "exceeds the cap of 8 MiB", maxWritten: 24 << 20},
		{name: "50 MB of tool arguments", body: func(w io.Writer) error {
			io.WriteString(w, sseChunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"write","arguments":""}}]}`))
			for range 50 << 20 / (64 << 10) {
				if _, err := io.WriteString(w, sseChunk(args64k)); err != nil {
					return err
				}
			}
			return nil
		}, wantKind: agent.ModelBadResponse, wantMessage: "exceeds the cap of 8 MiB", maxWritten: 24 << 20},
		{name: "one endless event", body: func(w io.Writer) error {
			io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"`)
			return forever("c")(w)
		}, max: small, wantKind: agent.ModelBadResponse, wantMessage: "one streamed event", maxWritten: 16 << 20},
		{name: "empty deltas forever", body: forever(sseChunk(`{}`)), max: small,
			wantKind: agent.ModelBadResponse, wantMessage: "the bytes received", maxWritten: 16 << 20},
		{name: "endless whole reply", plain: true, body: func(w io.Writer) error {
			io.WriteString(w, `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"`)
			return forever("d")(w)
		}, wantKind: agent.ModelBadResponse, wantMessage: "exceeds the cap of 8 MiB", maxWritten: 24 << 20},
		{name: "500 with an endless error body", status: 500, body: forever("e"), max: small,
			wantKind: agent.ModelServer, wantMessage: "exceeds the cap of 64 KiB", maxWritten: 16 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			status, ct := tt.status, "text/event-stream"
			if status == 0 {
				status = http.StatusOK
			}
			if tt.plain || status != http.StatusOK {
				ct = "application/json"
			}
			h := startHostile(t, status, ct, tt.body)
			c, _ := newClient(t, h.srv.URL, func(c *llm.Config) {
				c.NoStream, c.MaxReplyBytes = tt.plain, tt.max
				// Without the caps the call would read until this timeout.
				// (Long: on a loaded machine 8 MiB took over 10 s to arrive.)
				c.RequestTimeout, c.MaxRetries = time.Minute, -1
			})
			start := time.Now()
			_, err := c.Chat(context.Background(), agent.ModelRequest{Messages: userMsg}, func(agent.StreamEvent) {})
			if !agent.IsModelError(err, tt.wantKind) || !strings.Contains(fmt.Sprint(err), tt.wantMessage) {
				t.Errorf("err = %v, want %s mentioning %q", err, tt.wantKind, tt.wantMessage)
			}
			// The server's writes end soon after the client stops reading
			// (socket buffers hold a few MB more).
			time.Sleep(50 * time.Millisecond)
			n := h.written.Load()
			t.Logf("%s: the server wrote %d KiB before the client gave up (%s)", tt.name, n>>10, time.Since(start).Round(time.Millisecond))
			if n > tt.maxWritten {
				t.Errorf("the client took %d MiB in %s before giving up, want at most %d MiB", n>>20, time.Since(start).Round(time.Millisecond), tt.maxWritten>>20)
			}
		})
	}
}

// A bad response that repeats is retried exactly as documented, then the
// call fails: MaxRetries retries, whatever the fault.
func TestHostileModel_OversizedRepliesAreRetriedAsDocumented(t *testing.T) {
	h := startHostile(t, http.StatusOK, "text/event-stream", forever(sseChunk(`{"content":"`+strings.Repeat("a", 1024)+`"}`)))
	c, sl := newClient(t, h.srv.URL, func(c *llm.Config) { c.MaxReplyBytes = 64 << 10 })
	var retries int
	_, err := c.Chat(context.Background(), agent.ModelRequest{Messages: userMsg}, func(ev agent.StreamEvent) {
		if ev.Kind == agent.StreamRetry {
			retries++
		}
	})
	if !agent.IsModelError(err, agent.ModelBadResponse) || h.reqs.Load() != 1+llm.DefaultMaxRetries || retries != llm.DefaultMaxRetries || len(sl.list()) != llm.DefaultMaxRetries {
		t.Errorf("err = %v after %d requests, %d retry events, sleeps %v", err, h.reqs.Load(), retries, sl.list())
	}
}
