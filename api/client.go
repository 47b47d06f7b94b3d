package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// ErrNotFinal is returned by [Client.Result] for a task still in progress.
var ErrNotFinal = errors.New("api: task is not final yet")

// Client talks to a Wrench server's HTTP API. It is safe for concurrent use.
// Errors from the server are *[Error] values, matched with errors.Is against
// [ErrInvalid], [ErrUnauthorized], [ErrNotFound], [ErrConflict] and
// [ErrTooLarge].
type Client struct {
	base       string
	token      string
	hc         *http.Client
	retryWait  time.Duration
	retryFixed bool // set by WithStreamRetry: ignore the server's hint
	maxRetries int
}

// ClientOption configures a [Client].
type ClientOption func(*Client)

// WithHTTPClient sets the HTTP client (default: a client without an overall
// timeout, since event streams are long; bound calls with their ctx).
func WithHTTPClient(hc *http.Client) ClientOption { return func(c *Client) { c.hc = hc } }

// WithStreamRetry sets how long [Client.Events] waits before reconnecting a
// broken stream (default 1s, or the server's "retry:" hint) and how many
// consecutive reconnects without progress it makes before giving up
// (default 10).
func WithStreamRetry(wait time.Duration, attempts int) ClientOption {
	return func(c *Client) { c.retryWait, c.maxRetries, c.retryFixed = wait, attempts, true }
}

// NewClient returns a client for the server at baseURL (e.g.
// "http://127.0.0.1:7070"); token is sent as a bearer token when non-empty.
func NewClient(baseURL, token string, opts ...ClientOption) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), token: token, hc: &http.Client{},
		retryWait: time.Second, maxRetries: 10}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Submit submits t and returns its status; duplicate is true when the
// server already knew a task with t's ID (and st is that task's status).
func (c *Client) Submit(ctx context.Context, t task.Task) (st task.Status, duplicate bool, err error) {
	body, err := json.Marshal(t)
	if err != nil {
		return task.Status{}, false, fmt.Errorf("encode task: %w", err)
	}
	resp, err := c.do(ctx, http.MethodPost, "/v1/tasks", body, nil)
	if err != nil {
		return task.Status{}, false, err
	}
	defer resp.Body.Close()
	if err := decode(resp, &st); err != nil {
		return task.Status{}, false, err
	}
	return st, resp.StatusCode == http.StatusOK, nil
}

// Status returns the status of task id.
func (c *Client) Status(ctx context.Context, id string) (task.Status, error) {
	var st task.Status
	return st, c.getJSON(ctx, "/v1/tasks/"+url.PathEscape(id), &st)
}

// List returns one page of tasks, newest first.
func (c *Client) List(ctx context.Context, o task.ListOptions) (ListResponse, error) {
	q := url.Values{}
	if o.State != "" {
		q.Set("state", string(o.State))
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	path := "/v1/tasks"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var lr ListResponse
	return lr, c.getJSON(ctx, path, &lr)
}

// Cancel cancels task id and returns its status: final when it was queued
// (or already final), still running when the worker has yet to stop it.
func (c *Client) Cancel(ctx context.Context, id string) (task.Status, error) {
	resp, err := c.do(ctx, http.MethodPost, "/v1/tasks/"+url.PathEscape(id)+"/cancel", nil, nil)
	if err != nil {
		return task.Status{}, err
	}
	defer resp.Body.Close()
	var st task.Status
	return st, decode(resp, &st)
}

// Resume queues paused task id again, to continue from where it paused,
// and returns its status (queued); a task that is not paused gives an
// error matching [ErrConflict].
func (c *Client) Resume(ctx context.Context, id string) (task.Status, error) {
	resp, err := c.do(ctx, http.MethodPost, "/v1/tasks/"+url.PathEscape(id)+"/resume", nil, nil)
	if err != nil {
		return task.Status{}, err
	}
	defer resp.Body.Close()
	var st task.Status
	return st, decode(resp, &st)
}

// Patch returns the patch of a final task ("" when it changed nothing); a
// task not yet final gives an error matching [ErrConflict].
func (c *Client) Patch(ctx context.Context, id string) (string, error) {
	resp, err := c.do(ctx, http.MethodGet, "/v1/tasks/"+url.PathEscape(id)+"/patch", nil, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNoContent {
		return "", nil
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("read patch of %s: %w", id, err)
	}
	return string(b), nil
}

// Artifact returns one stored artifact of a final task by name
// (PatchArtifact, TrajectoryArtifact, LogArtifact, or another name its
// result lists).
func (c *Client) Artifact(ctx context.Context, id, name string) ([]byte, error) {
	if !ValidArtifactName(name) {
		return nil, fmt.Errorf("%q is not an artifact name", name)
	}
	resp, err := c.do(ctx, http.MethodGet, "/v1/tasks/"+url.PathEscape(id)+"/artifacts/"+url.PathEscape(name), nil, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read artifact %s of %s: %w", name, id, err)
	}
	return b, nil
}

// Result returns the result of a final task, or [ErrNotFinal] with the
// current status.
func (c *Client) Result(ctx context.Context, id string) (task.Result, task.Status, error) {
	st, err := c.Status(ctx, id)
	if err != nil {
		return task.Result{}, st, err
	}
	res, err := ResultOf(st)
	return res, st, err
}

// ResultOf returns the result a final status carries (made from the status
// itself when it has none, e.g. a task cancelled while queued), or
// [ErrNotFinal].
func ResultOf(st task.Status) (task.Result, error) {
	if !st.State.Final() {
		return task.Result{}, ErrNotFinal
	}
	if st.Result != nil {
		return *st.Result, nil
	}
	return task.Result{TaskID: st.TaskID, Status: st.State, Reason: st.Reason, Attempt: st.Attempt,
		Worker: st.Worker, FinishedAt: st.UpdatedAt}, nil
}

// Transient reports whether err, from a [Client] call, may go away on its
// own: the server answered 5xx or 429 (restarting, overloaded, its store
// unavailable), or could not be reached or did not answer in time. Callers
// that wait for a task retry these, bounded; other errors (bad token,
// unknown id, invalid request) will not change.
func Transient(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.StatusCode >= 500 || e.StatusCode == http.StatusTooManyRequests
	}
	var ue *url.Error
	return errors.As(err, &ue) && !errors.Is(err, context.Canceled)
}

func (c *Client) getJSON(ctx context.Context, path string, v any) error {
	resp, err := c.do(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return decode(resp, v)
}

// do sends a request and returns a 2xx response, or the server's *Error.
func (c *Client) do(ctx context.Context, method, path string, body []byte, hdr http.Header) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("User-Agent", "wrench-client")
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, c.base+path, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	e := &Error{StatusCode: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var eb ErrorBody
	if json.Unmarshal(b, &eb) == nil && eb.Error != "" {
		e.Message, e.Fields, e.TaskID = eb.Error, eb.Fields, eb.TaskID
	} else {
		e.Message = strings.TrimSpace(string(b))
	}
	return nil, e
}

func decode(resp *http.Response, v any) error {
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("decode answer of %s: %w", resp.Request.URL.Path, err)
	}
	return nil
}
