package api

import (
	"bufio"
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

// maxEventLine bounds one SSE line (an event's JSON).
const maxEventLine = 16 << 20

// Events follows the events of task id after sequence after (0: from the
// first), calling fn for each in order, and returns nil after the result
// event. A broken stream is reopened with Last-Event-ID set to the last
// sequence seen, so no event is delivered twice or lost; it gives up after
// the configured number of reconnects in a row that brought nothing new. An
// error from fn stops the stream and is returned; so are the server's 4xx
// answers (e.g. [ErrNotFound]) and ctx's error.
func (c *Client) Events(ctx context.Context, id string, after uint64, fn func(task.Event) error) error {
	path := "/v1/tasks/" + url.PathEscape(id) + "/events"
	wait := c.retryWait
	failures := 0
	for {
		hdr := http.Header{"Accept": {"text/event-stream"}}
		if after > 0 {
			hdr.Set("Last-Event-ID", strconv.FormatUint(after, 10))
		}
		resp, err := c.do(ctx, http.MethodGet, path, nil, hdr)
		var progressed, done bool
		if err == nil {
			progressed, done, err = c.readStream(resp.Body, &after, &wait, fn)
			resp.Body.Close()
			if done || errors.Is(err, errStop) {
				return unwrapStop(err)
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var apiErr *Error
		if errors.As(err, &apiErr) && apiErr.StatusCode < 500 {
			return err
		}
		if progressed {
			failures = 0
		} else {
			failures++
		}
		if failures > c.maxRetries {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("events of %s: gave up after %d reconnects: %w", id, c.maxRetries, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// errStop wraps an error returned by the caller's fn.
var errStop = errors.New("stopped by caller")

type stopError struct{ err error }

func (e stopError) Error() string        { return e.err.Error() }
func (e stopError) Is(target error) bool { return target == errStop }
func (e stopError) Unwrap() error        { return e.err }

func unwrapStop(err error) error {
	var s stopError
	if errors.As(err, &s) {
		return s.err
	}
	return err
}

// readStream parses one SSE response. progressed reports whether any event
// arrived; done whether the result event did.
func (c *Client) readStream(body io.Reader, after *uint64, wait *time.Duration, fn func(task.Event) error) (progressed, done bool, err error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventLine)
	var id, data string
	var hasData bool
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if !hasData {
				id = ""
				continue
			}
			var ev task.Event
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				return progressed, false, fmt.Errorf("decode event: %w", err)
			}
			if n, err := strconv.ParseUint(id, 10, 64); err == nil && n > 0 {
				ev.Seq = n
				*after = n
			}
			progressed = true
			if err := fn(ev); err != nil {
				return progressed, false, stopError{err}
			}
			if ev.Kind == task.EventResult {
				return progressed, true, nil
			}
			id, data, hasData = "", "", false
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue // comment (heartbeat)
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			id = value
		case "data":
			if hasData {
				data += "\n"
			}
			data += value
			hasData = true
		case "retry":
			if ms, err := strconv.Atoi(value); err == nil && ms > 0 && !c.retryFixed {
				*wait = time.Duration(ms) * time.Millisecond
			}
		}
	}
	if err := sc.Err(); err != nil {
		return progressed, false, fmt.Errorf("read event stream: %w", err)
	}
	return progressed, false, io.ErrUnexpectedEOF
}
