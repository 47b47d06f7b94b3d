package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/task"
)

// submitRetryFor bounds how long `wrench submit` keeps submitting a task
// the server answered 503 for (its store unreachable, or a NATS cluster
// electing a leader, which takes seconds); submitRetryWait is the pause
// between attempts.
const (
	submitRetryFor  = time.Minute
	submitRetryWait = time.Second
)

// submitter is what submitRetrying needs of an API client.
type submitter interface {
	Submit(ctx context.Context, t task.Task) (task.Status, bool, error)
}

// submitRetrying submits t, and again with the id the server named while
// it answers 503 ("was not queued" or "may be queued": the same id is
// queued at most once), for up to submitRetryFor, saying so on w.
func submitRetrying(ctx context.Context, w io.Writer, c submitter, t task.Task) (task.Status, bool, error) {
	deadline := time.Now().Add(submitRetryFor)
	for {
		st, dup, err := c.Submit(ctx, t)
		var e *api.Error
		if err == nil || !errors.As(err, &e) || e.StatusCode != http.StatusServiceUnavailable || e.TaskID == "" || time.Now().After(deadline) {
			return st, dup, err
		}
		t.ID = e.TaskID
		fmt.Fprintf(w, "wrench submit: %s; submitting %s again in %s\n", e.Message, t.ID, submitRetryWait)
		select {
		case <-ctx.Done():
			return st, dup, err
		case <-time.After(submitRetryWait):
		}
	}
}
