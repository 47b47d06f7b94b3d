// Package llm implements agent.Model against any OpenAI-compatible chat
// completions endpoint with github.com/openai/openai-go/v3, and opens the
// model a --model value names (a real endpoint, or the scripted model of
// package scripted on loopback).
//
// # Behaviour the rest of Wrench relies on
//
//   - Streaming is the default: deltas (text, reasoning_content, tool-call
//     start / argument fragments / end) go to the onDelta callback and the
//     complete reply is returned. Non-streaming replies are reported to
//     onDelta too, in one piece per part, so callers see one shape.
//   - The SDK's own retries are off. [Client] retries 429, 408, 5xx,
//     per-attempt timeouts, network errors and bad responses with
//     exponential backoff and jitter ([DefaultMaxRetries] retries from
//     [DefaultBackoffBase]), honouring Retry-After / Retry-After-Ms
//     (seconds or an HTTP date) and "x-should-retry: false"; it never
//     retries 400, 401 or 403. A streaming attempt that fails after deltas
//     went out is retried too: onDelta gets an agent.StreamRetry event
//     first, which voids what the attempt streamed. A Retry-After longer
//     than [Config].MaxRetryAfter ends the call with a *agent.ModelError
//     whose RetryAfter says how long to wait.
//   - One reply is bounded ([Config].MaxReplyBytes): the text, reasoning
//     and tool calls it accumulates, each streamed event, the bytes on the
//     wire, a whole body and an error body. Past a bound the attempt ends
//     with ModelBadResponse at once, so a server that streams forever or
//     sends huge arguments costs bounded memory.
//   - Every failure is a *agent.ModelError, except the caller's own context
//     ending, which is returned as the context's error (wrapped).
//   - A reply with no choices, a stream that ends (or is cut) without a
//     finish reason, a body that is not JSON or empty, a reply over its cap,
//     and a tool call with no id are ModelBadResponse. A tool call with no id can instead get a generated
//     id ([Config].GenerateMissingCallIDs) for endpoints known to omit them.
//     Tool-call arguments that are not valid JSON are passed through
//     untouched in agent.ToolCall.Arguments; the agent answers them with an
//     error observation. When such a call is sent back in the history, its
//     arguments are replaced by "{}" because some endpoints reject invalid
//     JSON there.
//   - The API key is sent only as the bearer header. It never appears in a
//     log line or an error: server messages are scrubbed of it.
package llm
