package main

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/task"
)

// answersSubmitter answers Submit with its errors in turn, then accepts,
// recording the ids it was given.
type answersSubmitter struct {
	errs []error
	ids  []string
}

func (s *answersSubmitter) Submit(_ context.Context, t task.Task) (task.Status, bool, error) {
	s.ids = append(s.ids, t.ID)
	if len(s.errs) > 0 {
		err := s.errs[0]
		s.errs = s.errs[1:]
		return task.Status{}, false, err
	}
	return task.Status{TaskID: t.ID, State: task.StateQueued}, false, nil
}

func TestSubmitRetriesUnavailableWithTheNamedID(t *testing.T) {
	unavailable := &api.Error{StatusCode: http.StatusServiceUnavailable, Message: "task srv-1 was not queued", TaskID: "srv-1"}
	for _, c := range []struct {
		name    string
		errs    []error
		wantIDs []string
		ok      bool
	}{
		{"503 then accepted, with the server's id", []error{unavailable, unavailable}, []string{"", "srv-1", "srv-1"}, true},
		{"400 is not retried", []error{&api.Error{StatusCode: http.StatusBadRequest, Message: "invalid"}}, []string{""}, false},
		{"503 naming no task is not retried", []error{&api.Error{StatusCode: http.StatusServiceUnavailable}}, []string{""}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &answersSubmitter{errs: c.errs}
			st, _, err := submitRetrying(context.Background(), io.Discard, s, task.Task{})
			if (err == nil) != c.ok || len(s.ids) != len(c.wantIDs) {
				t.Fatalf("err %v after ids %q; want ok=%v after %q", err, s.ids, c.ok, c.wantIDs)
			}
			for i := range s.ids {
				if s.ids[i] != c.wantIDs[i] {
					t.Fatalf("ids %q, want %q", s.ids, c.wantIDs)
				}
			}
			if c.ok && st.TaskID != "srv-1" {
				t.Errorf("status %+v", st)
			}
		})
	}
}
