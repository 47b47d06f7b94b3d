package scripted

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"
)

// replier writes one answer to one request.
type replier struct {
	w     http.ResponseWriter
	r     *http.Request
	req   *chatRequest
	msgs  []Message
	seq   int
	model string
	chunk int
}

// reply is an assistant reply ready to encode.
type reply struct {
	content, thinking string
	calls             []ToolCall
	finish            string
	usage             Usage
	noIDs             bool
}

func (rp *replier) build(st Step) reply {
	out := reply{content: st.Content, thinking: st.Thinking, finish: st.FinishReason}
	for i, tc := range st.ToolCalls {
		if tc.ID == "" {
			tc.ID = fmt.Sprintf("call_%d_%d", rp.seq, i)
		}
		out.calls = append(out.calls, tc)
	}
	if out.finish == "" {
		out.finish = "stop"
		if len(out.calls) > 0 {
			out.finish = "tool_calls"
		}
	}
	if st.Usage != nil {
		out.usage = *st.Usage
	} else {
		out.usage = estimateUsage(rp.msgs, out)
	}
	return out
}

// reply answers with the step's reply.
func (rp *replier) reply(st Step) { rp.send(rp.build(st)) }

// fault answers with the fault's error status or malformed reply.
func (rp *replier) fault(st Step, f *Fault) {
	if f.Status != 0 {
		if f.RetryAfter != "" {
			rp.w.Header().Set("Retry-After", f.RetryAfter)
		}
		msg := f.Message
		if msg == "" {
			msg = fmt.Sprintf("scripted: injected HTTP %d", f.Status)
		}
		writeError(rp.w, f.Status, errorType(f.Status), msg)
		return
	}
	rep := rp.build(st)
	switch f.Kind {
	case FaultNoChoices:
		if rp.req.Stream {
			rp.stream(rep, true, false)
		} else {
			rp.plain(rep, true)
		}
	case FaultCutStream:
		if rp.req.Stream {
			rp.stream(rep, false, true)
		} else {
			rp.cutPlain(rep)
		}
	case FaultGarbage:
		if rp.req.Stream {
			rp.w.Header().Set("Content-Type", "text/event-stream")
			rp.w.WriteHeader(http.StatusOK)
			_, _ = fmt.Fprint(rp.w, "data: {this is not json\n\n")
			return
		}
		rp.w.Header().Set("Content-Type", "application/json")
		rp.w.WriteHeader(http.StatusOK)
		_, _ = fmt.Fprint(rp.w, "<html>this is not JSON</html>")
	case FaultEmpty:
		ct := "application/json"
		if rp.req.Stream {
			ct = "text/event-stream"
		}
		rp.w.Header().Set("Content-Type", ct)
		rp.w.WriteHeader(http.StatusOK)
	case FaultBadJSONArgs:
		for i := range rep.calls {
			rep.calls[i].Arguments = corruptJSON(rep.calls[i].Arguments)
		}
		rp.send(rep)
	case FaultMissingCallID:
		rep.noIDs = true
		rp.send(rep)
	}
}

func (rp *replier) send(rep reply) {
	if rp.req.Stream {
		rp.stream(rep, false, false)
		return
	}
	rp.plain(rep, false)
}

func (rp *replier) completionID() string { return fmt.Sprintf("chatcmpl-scripted-%d", rp.seq) }

func (rp *replier) plain(rep reply, noChoices bool) {
	writeJSON(rp.w, http.StatusOK, rp.plainBody(rep, noChoices))
}

func (rp *replier) plainBody(rep reply, noChoices bool) map[string]any {
	msg := map[string]any{"role": "assistant", "content": nil}
	if rep.content != "" {
		msg["content"] = rep.content
	}
	if rep.thinking != "" {
		msg["reasoning_content"] = rep.thinking
	}
	if len(rep.calls) > 0 {
		var calls []any
		for _, tc := range rep.calls {
			c := map[string]any{"type": "function", "function": map[string]any{"name": tc.Name, "arguments": tc.Arguments}}
			if !rep.noIDs {
				c["id"] = tc.ID
			}
			calls = append(calls, c)
		}
		msg["tool_calls"] = calls
	}
	choices := []any{map[string]any{"index": 0, "message": msg, "finish_reason": rep.finish, "logprobs": nil}}
	if noChoices {
		choices = []any{}
	}
	return map[string]any{
		"id":      rp.completionID(),
		"object":  "chat.completion",
		"created": time.Now().Unix(),
		"model":   rp.model,
		"choices": choices,
		"usage":   usageJSON(rep.usage),
	}
}

// cutPlain promises the whole body, sends half of it and drops the
// connection.
func (rp *replier) cutPlain(rep reply) {
	body, _ := json.Marshal(rp.plainBody(rep, false))
	rp.w.Header().Set("Content-Type", "application/json")
	rp.w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	rp.w.WriteHeader(http.StatusOK)
	_, _ = rp.w.Write(body[:len(body)/2])
	abort(rp.w)
}

// stream writes the reply as server-sent events the way OpenAI does: a role
// delta, reasoning and content deltas, each tool call's header then its
// argument fragments, a finish delta, the usage chunk when asked for, and
// [DONE]. noChoices sends chunks with empty choices; cut drops the
// connection half-way.
func (rp *replier) stream(rep reply, noChoices, cut bool) {
	var chunks []map[string]any
	add := func(delta map[string]any, finish any) {
		chunks = append(chunks, rp.chunk0([]any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}}))
	}
	if noChoices {
		chunks = append(chunks, rp.chunk0([]any{}))
	} else {
		add(map[string]any{"role": "assistant", "content": ""}, nil)
		for _, p := range split(rep.thinking, rp.chunk) {
			add(map[string]any{"reasoning_content": p}, nil)
		}
		for _, p := range split(rep.content, rp.chunk) {
			add(map[string]any{"content": p}, nil)
		}
		for i, tc := range rep.calls {
			head := map[string]any{"index": i, "type": "function", "function": map[string]any{"name": tc.Name, "arguments": ""}}
			if !rep.noIDs {
				head["id"] = tc.ID
			}
			add(map[string]any{"tool_calls": []any{head}}, nil)
			for _, p := range split(tc.Arguments, rp.chunk) {
				add(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": p}}}}, nil)
			}
		}
		add(map[string]any{}, rep.finish)
	}
	if rp.req.StreamOptions.IncludeUsage {
		c := rp.chunk0([]any{})
		c["usage"] = usageJSON(rep.usage)
		chunks = append(chunks, c)
	}

	h := rp.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	rp.w.WriteHeader(http.StatusOK)
	flusher, _ := rp.w.(http.Flusher)
	for i, c := range chunks {
		if cut && i >= (len(chunks)+1)/2 {
			abort(rp.w)
		}
		data, _ := json.Marshal(c)
		if _, err := fmt.Fprintf(rp.w, "data: %s\n\n", data); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
	_, _ = fmt.Fprint(rp.w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

func (rp *replier) chunk0(choices []any) map[string]any {
	return map[string]any{
		"id":      rp.completionID(),
		"object":  "chat.completion.chunk",
		"created": time.Now().Unix(),
		"model":   rp.model,
		"choices": choices,
	}
}

// abort flushes what was written and drops the connection, so the client
// sees a body cut short.
func abort(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	panic(http.ErrAbortHandler)
}

// split cuts s into pieces of about n bytes without splitting a UTF-8
// sequence.
func split(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		end := min(n, len(s))
		for end < len(s) && !utf8.RuneStart(s[end]) {
			end++
		}
		out = append(out, s[:end])
		s = s[end:]
	}
	return out
}

// corruptJSON truncates a JSON text so that it no longer parses.
func corruptJSON(s string) string {
	t := s[:len(s)/2]
	if json.Valid([]byte(t)) {
		t += "{"
	}
	return t
}

// estimateUsage is a deterministic stand-in for token counts: about four
// bytes per token plus a few tokens per message.
func estimateUsage(msgs []Message, rep reply) Usage {
	var in int
	for _, m := range msgs {
		in += len(m.Content) + 4
		for _, tc := range m.ToolCalls {
			in += len(tc.Name) + len(tc.Arguments)
		}
	}
	out := len(rep.content) + len(rep.thinking)
	for _, tc := range rep.calls {
		out += len(tc.Name) + len(tc.Arguments)
	}
	return Usage{InputTokens: int64(in/4 + 1), OutputTokens: int64(out/4 + 1)}
}

func usageJSON(u Usage) map[string]any {
	return map[string]any{
		"prompt_tokens":     u.InputTokens,
		"completion_tokens": u.OutputTokens,
		"total_tokens":      u.InputTokens + u.OutputTokens,
	}
}

func errorType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_exceeded"
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return "invalid_api_key"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// sleep waits d unless the client goes away first; it reports whether the
// wait completed.
func sleep(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}
