package llm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/wrenchworks/wrench/agent"
)

// Chat sends one chat request, retrying transient failures (see the package
// documentation), streams deltas to onDelta (which may be nil) and returns
// the complete reply. Failures are *agent.ModelError, except the caller's
// context ending, which returns its error wrapped.
func (c *Client) Chat(ctx context.Context, req agent.ModelRequest, onDelta func(agent.StreamEvent)) (agent.ModelResponse, error) {
	model := req.Model
	if model == "" {
		model = c.cfg.Model
	}
	params, err := c.params(model, req)
	if err != nil {
		return agent.ModelResponse{}, &agent.ModelError{Kind: agent.ModelBadRequest, Err: err}
	}
	for attempt := 0; ; attempt++ {
		start := time.Now()
		resp, f := c.attempt(ctx, params, onDelta)
		if f == nil {
			c.log.DebugContext(ctx, "model call", "model", model, "attempt", attempt+1, "elapsed", time.Since(start),
				"input_tokens", resp.Usage.InputTokens, "output_tokens", resp.Usage.OutputTokens, "finish", resp.FinishReason)
			return resp, nil
		}
		if ctx.Err() != nil {
			return agent.ModelResponse{}, fmt.Errorf("chat with %s: %w", model, ctx.Err())
		}
		me := f.err
		if f.noRetry || !me.Retryable() || attempt >= c.cfg.MaxRetries {
			return agent.ModelResponse{}, me
		}
		delay := c.backoff(attempt)
		if me.RetryAfter > 0 {
			if me.RetryAfter > c.cfg.MaxRetryAfter {
				return agent.ModelResponse{}, me
			}
			delay = me.RetryAfter
		}
		c.log.WarnContext(ctx, "model call failed; retrying", "model", model, "attempt", attempt+1,
			"kind", string(me.Kind), "status", me.Status, "delay", delay, "err", me.Error())
		if onDelta != nil {
			onDelta(agent.StreamEvent{Kind: agent.StreamRetry,
				Text: fmt.Sprintf("%v; retry %d of %d in %s", me, attempt+1, c.cfg.MaxRetries, delay.Round(time.Millisecond))})
		}
		if err := c.sleep(ctx, delay); err != nil {
			return agent.ModelResponse{}, fmt.Errorf("chat with %s: waiting to retry after %s: %w", model, me.Kind, err)
		}
	}
}

// failure is a failed attempt.
type failure struct {
	err *agent.ModelError
	// noRetry: the server said "x-should-retry: false".
	noRetry bool
}

// attempt makes one request under its own timeout.
func (c *Client) attempt(ctx context.Context, params openai.ChatCompletionNewParams, onDelta func(agent.StreamEvent)) (agent.ModelResponse, *failure) {
	actx, cancel := context.WithTimeoutCause(ctx, c.cfg.RequestTimeout, errAttemptTimeout)
	defer cancel()
	var httpResp *http.Response
	into := option.WithResponseInto(&httpResp)

	if c.cfg.NoStream {
		cc, err := c.svc.New(actx, params, into, capBody(c.cfg.MaxReplyBytes, false))
		if err != nil {
			return agent.ModelResponse{}, c.classify(actx, err, httpResp)
		}
		resp, err := c.fromCompletion(cc)
		if err != nil {
			return agent.ModelResponse{}, &failure{err: badResponse(err)}
		}
		emitWhole(resp.Message, onDelta)
		return resp, nil
	}

	stream := c.svc.NewStreaming(actx, params, into, capBody(c.cfg.MaxReplyBytes, true))
	defer stream.Close()
	acc := newAccumulator(onDelta, c.cfg.MaxReplyBytes)
	for acc.err == nil && stream.Next() {
		acc.add(stream.Current())
	}
	if err := stream.Err(); err != nil && acc.err == nil {
		return agent.ModelResponse{}, c.classify(actx, err, httpResp)
	}
	resp, err := acc.result(c.cfg.GenerateMissingCallIDs)
	if err != nil {
		return agent.ModelResponse{}, &failure{err: badResponse(err)}
	}
	return resp, nil
}

func badResponse(err error) *agent.ModelError {
	return &agent.ModelError{Kind: agent.ModelBadResponse, Err: err}
}

// emitWhole reports a complete reply to onDelta, one event per part.
func emitWhole(m agent.Message, onDelta func(agent.StreamEvent)) {
	if onDelta == nil {
		return
	}
	if m.Thinking != "" {
		onDelta(agent.StreamEvent{Kind: agent.StreamThinking, Text: m.Thinking})
	}
	if m.Content != "" {
		onDelta(agent.StreamEvent{Kind: agent.StreamText, Text: m.Content})
	}
	for i, tc := range m.ToolCalls {
		onDelta(agent.StreamEvent{Kind: agent.StreamToolCallStart, Index: i, ID: tc.ID, Name: tc.Name})
		if tc.Arguments != "" {
			onDelta(agent.StreamEvent{Kind: agent.StreamToolCallArgs, Index: i, ID: tc.ID, Name: tc.Name, Text: tc.Arguments})
		}
		onDelta(agent.StreamEvent{Kind: agent.StreamToolCallEnd, Index: i, ID: tc.ID, Name: tc.Name})
	}
}

// isAttemptTimeout reports whether actx ended at the request timeout.
func isAttemptTimeout(actx context.Context) bool {
	return errors.Is(context.Cause(actx), errAttemptTimeout)
}
