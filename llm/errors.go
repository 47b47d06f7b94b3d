package llm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/wrenchworks/wrench/agent"
)

// maxErrorMessage bounds how much of a server's error message is kept.
const maxErrorMessage = 500

// classify turns a failed attempt into a typed failure. httpResp is the
// response the SDK saw, if any.
func (c *Client) classify(actx context.Context, err error, httpResp *http.Response) *failure {
	f := &failure{}
	var apiErr *openai.Error
	var streamErr *ssestream.StreamError
	var netErr net.Error
	switch {
	case isAttemptTimeout(actx):
		f.err = &agent.ModelError{Kind: agent.ModelTimeout, Err: fmt.Errorf("no complete reply within %s", c.cfg.RequestTimeout)}
	case errors.As(err, &apiErr):
		f.err = c.statusError(apiErr.StatusCode, apiErr.Response, apiErr.Message, apiErr)
		f.noRetry = apiErr.Response != nil && strings.EqualFold(apiErr.Response.Header.Get("x-should-retry"), "false")
	case httpResp != nil && httpResp.StatusCode >= 400:
		f.err = c.statusError(httpResp.StatusCode, httpResp, "", err)
		f.noRetry = strings.EqualFold(httpResp.Header.Get("x-should-retry"), "false")
	case errors.As(err, &streamErr):
		// An error event in the middle of a stream: the server failed.
		f.err = &agent.ModelError{Kind: agent.ModelServer, Err: c.redactErr("error event in stream", streamErr)}
	case httpResp != nil:
		// The server answered 2xx but the body broke off or did not parse.
		f.err = badResponse(c.redactErr("reading the reply", err))
	case errors.As(err, &netErr) && netErr.Timeout():
		f.err = &agent.ModelError{Kind: agent.ModelTimeout, Err: c.redactErr("network timeout", err)}
	default:
		f.err = &agent.ModelError{Kind: agent.ModelNetwork, Err: c.redactErr("sending the request", err)}
	}
	return f
}

// statusError maps an HTTP error status to a ModelError.
func (c *Client) statusError(status int, resp *http.Response, message string, err error) *agent.ModelError {
	me := &agent.ModelError{Status: status}
	switch {
	case status == http.StatusTooManyRequests:
		me.Kind = agent.ModelRateLimited
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		me.Kind = agent.ModelAuth
	case status == http.StatusRequestTimeout:
		me.Kind = agent.ModelTimeout
	case status >= 500:
		me.Kind = agent.ModelServer
	case status >= 400:
		me.Kind = agent.ModelBadRequest
	default:
		me.Kind = agent.ModelBadResponse
	}
	if resp != nil {
		me.RetryAfter = retryAfter(resp.Header, time.Now())
	}
	msg := http.StatusText(status)
	if message != "" {
		msg = message
	}
	me.Err = c.redactErr(msg, err)
	return me
}

// retryAfter reads Retry-After-Ms (milliseconds) or Retry-After (seconds
// or an HTTP date); 0 means none.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < 1e12 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 && s < 1e9 {
			return time.Duration(s * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// redactedError carries an error with a message scrubbed of the API key;
// errors.As still reaches the original.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redactErr describes err under what, with the API key scrubbed and the
// text bounded.
func (c *Client) redactErr(what string, err error) error {
	msg := what
	if err != nil && err.Error() != what {
		msg = what + ": " + err.Error()
	}
	if c.cfg.APIKey != "" {
		msg = strings.ReplaceAll(msg, c.cfg.APIKey, "[REDACTED]")
	}
	if len(msg) > maxErrorMessage {
		msg = msg[:maxErrorMessage] + "…"
	}
	return &redactedError{msg: msg, err: err}
}
