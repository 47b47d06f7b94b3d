package api

import (
	"net/http/httptest"

	"context"
	"errors"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue/natsserver"
	"github.com/wrenchworks/wrench/task"
)

// TestAgainstEmbeddedNATS runs the API over the real queue on an in-process
// nats-server: submit, duplicate, status, list, events, cancel, patch.
func TestAgainstEmbeddedNATS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := natstest.Connect(t, natstest.Start(t, natsserver.Config{}))
	s, err := NewServer(Config{Submitter: conn.Submissions(), States: conn.States(), Events: conn.Events(),
		Artifacts: conn.Artifacts(), Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := NewClient(srv.URL, "tok")

	tk := task.Task{ID: "t-nats", Repo: task.Repo{URL: "/r"}, Instruction: "Fix it."}
	st, dup, err := c.Submit(ctx, tk)
	if err != nil || dup || st.State != task.StateQueued {
		t.Fatalf("submit: %v dup=%v %+v", err, dup, st)
	}
	if _, dup, err := c.Submit(ctx, tk); err != nil || !dup {
		t.Fatalf("duplicate: %v dup=%v", err, dup)
	}
	if _, _, err := c.Submit(ctx, task.Task{Repo: task.Repo{URL: "/r"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("invalid submit: %v", err)
	}
	if _, err := c.Status(ctx, "t-unknown"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown status: %v", err)
	}
	lr, err := c.List(ctx, task.ListOptions{State: task.StateQueued})
	if err != nil || len(lr.Tasks) != 1 || lr.Tasks[0].TaskID != "t-nats" {
		t.Fatalf("list: %v %+v", err, lr)
	}
	if _, err := c.List(ctx, task.ListOptions{Cursor: "nonsense"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad cursor: %v", err)
	}
	if _, err := c.Patch(ctx, "t-nats"); !errors.Is(err, ErrConflict) {
		t.Errorf("patch of a queued task: %v", err)
	}

	// Follow the events while the task is cancelled: the stream carries the
	// queued state and ends with the result.
	done := make(chan []task.Event, 1)
	errc := make(chan error, 1)
	go func() {
		var evs []task.Event
		err := c.Events(ctx, "t-nats", 0, func(ev task.Event) error {
			evs = append(evs, ev)
			return nil
		})
		done <- evs
		errc <- err
	}()
	if st, err := c.Cancel(ctx, "t-nats"); err != nil || st.State != task.StateCancelled {
		t.Fatalf("cancel: %v %+v", err, st)
	}
	evs := <-done
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if len(evs) < 2 || evs[0].Kind != task.EventState || evs[len(evs)-1].Kind != task.EventResult {
		t.Fatalf("events %+v", evs)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq <= evs[i-1].Seq {
			t.Errorf("sequence not increasing: %d then %d", evs[i-1].Seq, evs[i].Seq)
		}
	}
	// Resuming after the last event still ends with a result (made from
	// the state record when nothing new is stored).
	var resumed []task.Event
	if err := c.Events(ctx, "t-nats", evs[len(evs)-1].Seq, func(ev task.Event) error {
		resumed = append(resumed, ev)
		return nil
	}); err != nil || len(resumed) != 1 || resumed[0].Kind != task.EventResult {
		t.Errorf("resume after the end: %v %+v", err, resumed)
	}
	if res, _, err := c.Result(ctx, "t-nats"); err != nil || res.Status != task.StateCancelled {
		t.Errorf("result: %v %+v", err, res)
	}
	if p, err := c.Patch(ctx, "t-nats"); err != nil || p != "" {
		t.Errorf("patch of a cancelled task: %q %v", p, err)
	}
}
