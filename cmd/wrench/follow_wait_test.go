package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/task"
)

// finishingServer answers like a server whose task is finishing: the event
// stream ends with a result event sent before the final state is stored
// (as servers did when they published the runner's own), and the status
// goes through the given answers (a state, or an HTTP error code as "503")
// before it is final.
type finishingServer struct {
	mu      sync.Mutex
	answers []string
	polls   int
}

func (f *finishingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	writeJSON := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	res := task.Result{TaskID: "t-fin", Status: task.StateResolved, Usage: task.Usage{Turns: 2}}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/tasks":
		writeJSON(http.StatusCreated, task.Status{TaskID: "t-fin", State: task.StateQueued})
	case r.URL.Path == "/v1/tasks/t-fin/events":
		w.Header().Set("Content-Type", "text/event-stream")
		ev, _ := json.Marshal(task.Event{TaskID: "t-fin", Kind: task.EventResult, State: task.StateResolved, Result: &res})
		fmt.Fprintf(w, "id: 7\nevent: result\ndata: %s\n\n", ev)
	case r.URL.Path == "/v1/tasks/t-fin":
		f.mu.Lock()
		f.polls++
		answer := string(task.StateResolved)
		if len(f.answers) > 0 {
			answer, f.answers = f.answers[0], f.answers[1:]
		}
		f.mu.Unlock()
		var code int
		if _, err := fmt.Sscan(answer, &code); err == nil {
			writeJSON(code, api.ErrorBody{Error: "the task store did not answer in time"})
			return
		}
		st := task.Status{TaskID: "t-fin", State: task.State(answer)}
		if st.State.Final() {
			st.Result = &res
		}
		writeJSON(http.StatusOK, st)
	default:
		http.NotFound(w, r)
	}
}

// TestWaitRidesOutAFinishingTask: `submit --wait`, `submit --follow` and
// `watch` wait for the stored final state after the stream's result event,
// through transient server errors, and exit with the final state's code.
func TestWaitRidesOutAFinishingTask(t *testing.T) {
	for _, args := range [][]string{
		{"submit", "--repo", "https://example.com/r.git", "--task", "x", "--wait"},
		{"submit", "--repo", "https://example.com/r.git", "--task", "x", "--follow"},
		{"watch", "t-fin"},
	} {
		t.Run(strings.Join(args[:1], " ")+" "+args[len(args)-1], func(t *testing.T) {
			fs := &finishingServer{answers: []string{"verifying", "503", "502", "verifying"}}
			if args[0] == "watch" {
				fs.answers = append([]string{"running"}, fs.answers...) // watch reads the status first
			}
			hs := httptest.NewServer(fs)
			defer hs.Close()
			code, out, errOut := wrench(t, &testServer{url: hs.URL}, args...)
			if code != exitOK || !strings.Contains(out+errOut, "resolved") {
				t.Fatalf("exit %d, want 0 with the outcome:\n%s%s", code, out, errOut)
			}
			if strings.Contains(errOut, "not final") || len(fs.answers) > 0 {
				t.Errorf("left %v unread; stderr:\n%s", fs.answers, errOut)
			}
		})
	}
}

// TestPollGivesUp: the wait is bounded; a server that keeps failing ends it
// with that failure, and an error that will not go away ends it at once.
func TestPollGivesUp(t *testing.T) {
	p := poller{first: time.Millisecond, max: time.Millisecond, request: time.Second, failures: 3}
	ctx := context.Background()
	fs := &finishingServer{answers: []string{"503", "503", "503", "503", "503"}}
	hs := httptest.NewServer(fs)
	defer hs.Close()
	if _, err := p.final(ctx, api.NewClient(hs.URL, ""), "t-fin"); err == nil || fs.polls != 3 || !strings.Contains(err.Error(), "3 failures") {
		t.Errorf("after %d polls: %v", fs.polls, err)
	}
	fs = &finishingServer{answers: []string{"404"}}
	hs2 := httptest.NewServer(fs)
	defer hs2.Close()
	if _, err := p.final(ctx, api.NewClient(hs2.URL, ""), "t-fin"); !errors.Is(err, api.ErrNotFound) || fs.polls != 1 {
		t.Errorf("after %d polls: %v", fs.polls, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.final(cctx, api.NewClient(hs.URL, ""), "t-fin"); err == nil {
		t.Error("a done context did not end the wait")
	}
}
