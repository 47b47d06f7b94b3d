// Package scripted is an OpenAI-compatible chat model that plays a script.
//
// A [Script] is a list of steps, one assistant reply per step. A [Handler]
// serves the script over HTTP as /v1/chat/completions (plain JSON, or
// server-sent events when the request sets "stream": true) and /v1/models,
// so the real openai-go client path is exercised end to end without an API
// key. [Start] runs a handler on a loopback listener; `--model scripted:FILE`
// and `wrench model scripted` are built on it.
//
// # Script format
//
//	model: scripted            # optional: the model name the server reports
//	final: "Done."             # optional: the reply once the steps run out
//	steps:
//	  - content: "Run the tests first."
//	    thinking: "…"          # optional: streamed as reasoning_content
//	    tool_calls:
//	      - name: bash
//	        arguments: {command: "go test ./..."}   # a map is sent as JSON
//	  - expect_observation: "FAIL"                  # regex, see below
//	    tool_calls:
//	      - name: edit
//	        arguments: '{"path": "calc.go"'         # a string is sent verbatim
//	    usage: {input_tokens: 1200, output_tokens: 40}
//	    finish_reason: tool_calls
//	    fault: {status: 429, retry_after: 1, times: 2}
//
// Steps are played in order, one per request. A step's expect_observation is
// a regular expression matched against the text of the tool and user
// messages the request carries after its last assistant message; it is
// checked once, on the first request that reaches the step. A mismatch
// answers HTTP 500 naming the step (steps are numbered from 1) with the
// header "x-should-retry: false", and every later request gets the same
// answer: the script has diverged. When the steps run out, every request
// gets a plain-text reply (final) with no tool calls.
//
// A conversation that reaches a fresh server already holding assistant
// replies (it began elsewhere: a resumed task continued by another
// process) starts at the step after them: with three replies in its
// first request, step 4 answers.
//
// Tool-call ids default to "call_<request>_<index>", unique per reply.
// Usage defaults to a deterministic estimate from message lengths.
//
// # Faults
//
// A step's fault is answered to the first `times` (default 1) requests that
// reach the step, before its real reply:
//
//   - status: answer with that HTTP status and an OpenAI-style error body;
//     retry_after sets the Retry-After header (seconds or an HTTP date).
//   - delay: wait that long first (given up if the client goes away); alone,
//     the reply after the wait is the step's real reply.
//   - kind: no_choices (a reply with an empty choices list), cut_stream (the
//     connection is dropped half-way through the reply), garbage (a 200
//     whose body is not JSON), empty (a 200 with an empty body), bad_json_args (the step's reply with its tool
//     arguments truncated into invalid JSON), missing_call_id (the step's
//     reply with its tool-call ids left out).
//
// The server also checks what real endpoints check: a tool message must
// answer a tool call of the assistant message before it, and every tool call
// must be answered before the conversation moves on (HTTP 400 otherwise).
package scripted
