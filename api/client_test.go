package api

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/task"
)

func TestClientCalls(t *testing.T) {
	f := newFake()
	f.put(task.Status{TaskID: "t-done", State: task.StateResolved,
		Result: &task.Result{TaskID: "t-done", Status: task.StateResolved, Patch: "PATCH"}})
	f.put(task.Status{TaskID: "t-run", State: task.StateRunning})
	srv := newTestServer(t, f, func(c *Config) { c.Token = "tok" })
	c := NewClient(srv.URL+"/", "tok")
	ctx := context.Background()

	st, dup, err := c.Submit(ctx, task.Task{ID: "t-new", Repo: task.Repo{URL: "/r"}, Instruction: "x"})
	if err != nil || dup || st.State != task.StateQueued {
		t.Fatalf("submit: %v %v %+v", err, dup, st)
	}
	if _, dup, err = c.Submit(ctx, task.Task{ID: "t-new", Repo: task.Repo{URL: "/r"}, Instruction: "x"}); err != nil || !dup {
		t.Errorf("duplicate submit: dup=%v err=%v", dup, err)
	}
	if st, err := c.Status(ctx, "t-run"); err != nil || st.State != task.StateRunning {
		t.Errorf("status: %v %+v", err, st)
	}
	lr, err := c.List(ctx, task.ListOptions{Limit: 2})
	if err != nil || len(lr.Tasks) != 2 || lr.NextCursor == "" {
		t.Fatalf("list page 1: %v %+v", err, lr)
	}
	lr2, err := c.List(ctx, task.ListOptions{Limit: 2, Cursor: lr.NextCursor})
	if err != nil || len(lr2.Tasks) != 1 || lr2.NextCursor != "" {
		t.Errorf("list page 2: %v %+v", err, lr2)
	}
	if p, err := c.Patch(ctx, "t-done"); err != nil || p != "PATCH" {
		t.Errorf("patch: %q %v", p, err)
	}
	if res, _, err := c.Result(ctx, "t-done"); err != nil || res.Status != task.StateResolved {
		t.Errorf("result: %v %+v", err, res)
	}
	if _, st, err := c.Result(ctx, "t-run"); !errors.Is(err, ErrNotFinal) || st.State != task.StateRunning {
		t.Errorf("result of running task: %v", err)
	}
	if st, err := c.Cancel(ctx, "t-new"); err != nil || st.State != task.StateCancelled {
		t.Errorf("cancel: %v %+v", err, st)
	}
}

func TestClientTypedErrors(t *testing.T) {
	f := newFake()
	f.put(task.Status{TaskID: "t-run", State: task.StateRunning})
	srv := newTestServer(t, f, func(c *Config) { c.Token = "tok" })
	ctx := context.Background()
	good, anon := NewClient(srv.URL, "tok"), NewClient(srv.URL, "")

	tests := []struct {
		name   string
		call   func() error
		want   error
		fields []string
	}{
		{"401", func() error { _, err := anon.Status(ctx, "t-run"); return err }, ErrUnauthorized, nil},
		{"404", func() error { _, err := good.Status(ctx, "t-none"); return err }, ErrNotFound, nil},
		{"409", func() error { _, err := good.Patch(ctx, "t-run"); return err }, ErrConflict, nil},
		{"400", func() error {
			_, _, err := good.Submit(ctx, task.Task{Repo: task.Repo{URL: "gopher://x"}})
			return err
		}, ErrInvalid, []string{"repo.url", "instruction"}},
		{"413", func() error {
			_, _, err := good.Submit(ctx, task.Task{Repo: task.Repo{URL: "/r"}, Instruction: strings.Repeat("x", 5000)})
			return err
		}, ErrTooLarge, nil},
		{"404 on events", func() error {
			return good.Events(ctx, "t-none", 0, func(task.Event) error { return nil })
		}, ErrNotFound, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%T is not *Error", err)
			}
			if tc.fields != nil && !slices.Equal(fieldNames(e.Fields), tc.fields) {
				t.Errorf("fields %v, want %v", fieldNames(e.Fields), tc.fields)
			}
		})
	}
}

func TestClientEventsResume(t *testing.T) {
	f := newFake()
	seed(f)
	f.breakAfter = 2 // the first stream drops after two events
	srv := newTestServer(t, f, nil)
	c := NewClient(srv.URL, "", WithStreamRetry(time.Millisecond, 3))
	var seqs []uint64
	err := c.Events(context.Background(), "t-1", 0, func(ev task.Event) error {
		seqs = append(seqs, ev.Seq)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seqs, []uint64{1, 2, 3, 4}) {
		t.Errorf("got seqs %v, want each of 1..4 once", seqs)
	}

	// Starting after a sequence skips what came before.
	seqs = nil
	if err := c.Events(context.Background(), "t-1", 3, func(ev task.Event) error {
		seqs = append(seqs, ev.Seq)
		return nil
	}); err != nil || !slices.Equal(seqs, []uint64{4}) {
		t.Errorf("after 3: %v %v", seqs, err)
	}
}

func TestClientEventsStopAndGiveUp(t *testing.T) {
	f := newFake()
	seed(f)
	srv := newTestServer(t, f, nil)
	c := NewClient(srv.URL, "", WithStreamRetry(time.Millisecond, 2))
	stop := errors.New("enough")
	n := 0
	err := c.Events(context.Background(), "t-1", 0, func(task.Event) error {
		n++
		return stop
	})
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("fn error: got %v after %d events", err, n)
	}

	srv.Close()
	err = c.Events(context.Background(), "t-1", 0, func(task.Event) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "gave up") {
		t.Errorf("server gone: %v", err)
	}
}

func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"503", &Error{StatusCode: 503}, true},
		{"500 wrapped", fmt.Errorf("status: %w", &Error{StatusCode: 500}), true},
		{"429", &Error{StatusCode: 429}, true},
		{"404", &Error{StatusCode: 404}, false},
		{"401", &Error{StatusCode: 401}, false},
		{"unreachable", &url.Error{Op: "Get", URL: "http://x", Err: errors.New("connection refused")}, true},
		{"request timeout", &url.Error{Op: "Get", URL: "http://x", Err: context.DeadlineExceeded}, true},
		{"caller cancelled", &url.Error{Op: "Get", URL: "http://x", Err: context.Canceled}, false},
		{"other", errors.New("decode answer"), false},
	} {
		if got := Transient(tc.err); got != tc.want {
			t.Errorf("%s: Transient = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestResultOf(t *testing.T) {
	if _, err := ResultOf(task.Status{TaskID: "t", State: task.StateVerifying}); !errors.Is(err, ErrNotFinal) {
		t.Errorf("verifying: %v", err)
	}
	res, err := ResultOf(task.Status{TaskID: "t", State: task.StateCancelled, Reason: "cancelled while queued"})
	if err != nil || res.Status != task.StateCancelled || res.Reason != "cancelled while queued" || res.TaskID != "t" {
		t.Errorf("cancelled without a result: %+v %v", res, err)
	}
}
