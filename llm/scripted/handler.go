package scripted

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// maxRequestBody bounds a request body (a long conversation is a few MB).
const maxRequestBody = 64 << 20

// maxLog bounds the request log of a long-running server; the oldest
// records are dropped first.
const maxLog = 1000

// Handler serves one [Script] as an OpenAI-compatible endpoint. Requests
// are served one at a time, in arrival order, so a script plays in order
// even under concurrent clients. It is safe for concurrent use.
type Handler struct {
	script *Script
	opts   options
	mux    *http.ServeMux

	mu        sync.Mutex // serializes requests; guards the fields below
	next      int        // index of the step the next request plays
	faultsRun int        // faults answered at step next
	checked   bool       // expect_observation of step next passed
	diverged  string     // sticky expect_observation failure
	started   bool       // a conversation reached the steps
	seq       int        // requests received
	log       []Request
}

// Option configures a [Handler] (and [Start]).
type Option func(*options)

type options struct {
	logger    *slog.Logger
	apiKey    string
	chunkSize int
}

// WithLogger logs each request's step and outcome at debug level (and
// divergences at warn). The default discards.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithAPIKey makes the server require "Authorization: Bearer key" and
// answer 401 otherwise. The default accepts any request.
func WithAPIKey(key string) Option { return func(o *options) { o.apiKey = key } }

// WithChunkSize sets how many bytes of text or tool arguments each streamed
// delta carries (default 12).
func WithChunkSize(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.chunkSize = n
		}
	}
}

// Request is what the handler recorded of one chat request.
type Request struct {
	// Seq numbers requests from 1.
	Seq int
	// Step is the 1-based step the request was served from; 0 once the
	// steps have run out or for requests rejected before reaching a step.
	Step   int
	Stream bool
	Model  string
	// Messages are the request's messages, content flattened to text.
	Messages []Message
	// Tools are the names of the tools offered.
	Tools []string
	// Outcome is "reply", "final", "fault:<status or kind>", "diverged",
	// "bad_request" or "unauthorized".
	Outcome string
}

// Message is one request message, as the handler saw it.
type Message struct {
	Role       string
	Content    string
	ToolCalls  []ToolCall
	ToolCallID string
}

// NewHandler returns a handler that plays s from its first step.
func NewHandler(s *Script, opts ...Option) *Handler {
	o := options{logger: slog.New(slog.DiscardHandler), chunkSize: 12}
	for _, opt := range opts {
		opt(&o)
	}
	h := &Handler{script: s, opts: o, mux: http.NewServeMux()}
	h.mux.HandleFunc("POST /v1/chat/completions", h.chat)
	h.mux.HandleFunc("GET /v1/models", h.models)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "scripted: no route for "+r.Method+" "+r.URL.Path)
	})
	return h
}

// ServeHTTP implements [http.Handler].
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.opts.apiKey != "" {
		got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if subtle.ConstantTimeCompare([]byte(got), []byte(h.opts.apiKey)) != 1 {
			h.mu.Lock()
			h.seq++
			h.log = append(h.log, Request{Seq: h.seq, Outcome: "unauthorized"})
			h.mu.Unlock()
			writeError(w, http.StatusUnauthorized, "invalid_api_key", "scripted: missing or wrong API key")
			return
		}
	}
	h.mux.ServeHTTP(w, r)
}

// Step returns how many steps have been played; it is the 0-based index of
// the step the next request plays (len(Steps) once they have run out).
func (h *Handler) Step() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.next
}

// Requests returns a copy of the chat requests received so far, in order
// (the latest 1000).
func (h *Handler) Requests() []Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Request(nil), h.log...)
}

func (h *Handler) models(w http.ResponseWriter, _ *http.Request) {
	name := h.script.Model
	if name == "" {
		name = "scripted"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data":   []any{map[string]any{"id": name, "object": "model", "created": 0, "owned_by": "wrench"}},
	})
}

// chatRequest is the part of a chat completions request the handler reads.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	Stream        bool `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

func (h *Handler) chat(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "scripted: read request: "+err.Error())
		return
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	rec := Request{Seq: h.seq}
	defer func() {
		if len(h.log) >= maxLog {
			h.log = append(h.log[:0], h.log[len(h.log)-maxLog+1:]...)
		}
		h.log = append(h.log, rec)
		h.opts.logger.Debug("scripted model request", "seq", rec.Seq, "step", rec.Step, "stream", rec.Stream, "outcome", rec.Outcome)
	}()

	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		rec.Outcome = "bad_request"
		writeError(w, http.StatusBadRequest, "invalid_request_error", "scripted: request is not valid JSON: "+err.Error())
		return
	}
	rec.Stream, rec.Model = req.Stream, req.Model
	rec.Messages = flattenMessages(req)
	for _, t := range req.Tools {
		rec.Tools = append(rec.Tools, t.Function.Name)
	}
	if msg := validateConversation(req.Model, rec.Messages); msg != "" {
		rec.Outcome = "bad_request"
		writeError(w, http.StatusBadRequest, "invalid_request_error", "scripted: "+msg)
		return
	}
	h.continueConversation(rec.Messages)
	if h.diverged != "" {
		rec.Outcome = "diverged"
		w.Header().Set("x-should-retry", "false")
		writeError(w, http.StatusInternalServerError, "script_diverged", h.diverged)
		return
	}

	rp := replier{w: w, r: r, req: &req, msgs: rec.Messages, seq: h.seq, model: h.model(req.Model), chunk: h.opts.chunkSize}
	if h.next >= len(h.script.Steps) {
		rec.Outcome = "final"
		rp.reply(Step{Content: h.script.Final})
		return
	}
	step := h.script.Steps[h.next]
	rec.Step = h.next + 1

	if !h.checked && step.Expect != nil {
		obs := observations(rec.Messages)
		if !step.Expect.MatchString(obs) {
			h.diverged = fmt.Sprintf("scripted: step %d: expect_observation /%s/ did not match the observations since the last assistant turn: %q",
				rec.Step, step.Expect, truncate(obs, 600))
			h.opts.logger.Warn("scripted model diverged", "step", rec.Step, "expect", step.Expect.String())
			rec.Outcome = "diverged"
			w.Header().Set("x-should-retry", "false")
			writeError(w, http.StatusInternalServerError, "script_diverged", h.diverged)
			return
		}
	}
	h.checked = true

	if f := step.Fault; f != nil && h.faultsRun < f.Times {
		h.faultsRun++
		rec.Outcome = "fault:" + faultName(f)
		if !sleep(r, f.Delay) {
			return // the client went away; the fault is spent
		}
		if f.Status != 0 || f.Kind != "" {
			rp.fault(step, f)
			return
		}
		rec.Outcome = "reply"
	} else {
		rec.Outcome = "reply"
	}
	h.next++
	h.faultsRun, h.checked = 0, false
	rp.reply(step)
}

func (h *Handler) model(requested string) string {
	if h.script.Model != "" {
		return h.script.Model
	}
	if requested != "" {
		return requested
	}
	return "scripted"
}

func faultName(f *Fault) string {
	switch {
	case f.Status != 0:
		return fmt.Sprint(f.Status)
	case f.Kind != "":
		return string(f.Kind)
	}
	return "delay"
}

// flattenMessages turns request messages into text messages; content given
// as a list of parts keeps its text parts.
// continueConversation starts the script where a conversation begun
// elsewhere is (a resumed task's, continued by another process): the first
// request that reaches the steps plays the step after the assistant
// replies it already holds.
func (h *Handler) continueConversation(msgs []Message) {
	if h.started {
		return
	}
	h.started = true
	replies := 0
	for _, m := range msgs {
		if m.Role == "assistant" {
			replies++
		}
	}
	h.next = min(replies, len(h.script.Steps))
}

func flattenMessages(req chatRequest) []Message {
	out := make([]Message, 0, len(req.Messages))
	for _, m := range req.Messages {
		msg := Message{Role: m.Role, Content: contentText(m.Content), ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		out = append(out, msg)
	}
	return out
}

func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// validateConversation checks what real endpoints reject: no messages, no
// model, tool messages that answer no pending call, and calls left
// unanswered. It returns "" when the conversation is acceptable.
func validateConversation(model string, msgs []Message) string {
	if model == "" {
		return "model is required"
	}
	if len(msgs) == 0 {
		return "messages must not be empty"
	}
	pending := map[string]bool{}
	for i, m := range msgs {
		switch m.Role {
		case "system", "developer", "user", "assistant":
			if len(pending) > 0 {
				return fmt.Sprintf("messages[%d]: tool calls %s were not answered before a %s message", i, keys(pending), m.Role)
			}
			for _, tc := range m.ToolCalls {
				if tc.ID == "" {
					return fmt.Sprintf("messages[%d]: tool call %q has no id", i, tc.Name)
				}
				pending[tc.ID] = true
			}
		case "tool":
			if !pending[m.ToolCallID] {
				return fmt.Sprintf("messages[%d]: tool message answers %q, which is not a pending tool call", i, m.ToolCallID)
			}
			delete(pending, m.ToolCallID)
		default:
			return fmt.Sprintf("messages[%d]: unknown role %q", i, m.Role)
		}
	}
	if len(pending) > 0 {
		return fmt.Sprintf("tool calls %s were not answered", keys(pending))
	}
	return ""
}

func keys(m map[string]bool) string {
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}

// observations is the text of the tool and user messages after the last
// assistant message, joined by newlines.
func observations(msgs []Message) string {
	start := 0
	for i, m := range msgs {
		if m.Role == "assistant" {
			start = i + 1
		}
	}
	var parts []string
	for _, m := range msgs[start:] {
		if m.Role == "tool" || m.Role == "user" {
			parts = append(parts, m.Content)
		}
	}
	return strings.Join(parts, "\n")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
