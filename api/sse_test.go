package api

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// seed stores a short run of task t-1: state, turn, tool call, result.
func seed(f *fakeBackend) {
	f.put(task.Status{TaskID: "t-1", State: task.StateRunning})
	f.emit(task.Event{TaskID: "t-1", Kind: task.EventState, State: task.StateRunning})
	f.emit(task.Event{TaskID: "t-1", Kind: task.EventTurn, Turn: 1})
	f.emit(task.Event{TaskID: "t-1", Kind: task.EventToolCall, Tool: "bash", Text: "go test ./...\nsecond line"})
	f.emit(task.Event{TaskID: "t-1", Kind: task.EventResult, State: task.StateResolved,
		Result: &task.Result{TaskID: "t-1", Status: task.StateResolved}})
}

// readSSE reads a whole stream and returns its lines.
func readSSE(t *testing.T, url string, hdr map[string]string) (http.Header, []string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("code %d", resp.StatusCode)
	}
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return resp.Header, lines
}

func TestSSEOrderAndEnd(t *testing.T) {
	f := newFake()
	seed(f)
	srv := newTestServer(t, f, nil)
	hdr, lines := readSSE(t, srv.URL+"/v1/tasks/t-1/events", nil)
	if ct := hdr.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("content type %q", ct)
	}
	var ids, kinds []string
	for _, l := range lines {
		if v, ok := strings.CutPrefix(l, "id: "); ok {
			ids = append(ids, v)
		}
		if v, ok := strings.CutPrefix(l, "event: "); ok {
			kinds = append(kinds, v)
		}
		if strings.HasPrefix(l, "data: ") && strings.Contains(l, "\n") {
			t.Errorf("data line holds a newline: %q", l)
		}
	}
	if got := strings.Join(ids, ","); got != "1,2,3,4" {
		t.Errorf("ids %s, want 1,2,3,4", got)
	}
	if got := strings.Join(kinds, ","); got != "state,turn,tool_call,result" {
		t.Errorf("kinds %s", got)
	}
	// The stream ended after the result event (readSSE returned at EOF).
	if last := lines[len(lines)-2]; !strings.Contains(last, `"kind":"result"`) {
		t.Errorf("last data line %q", last)
	}
}

func TestSSEResume(t *testing.T) {
	f := newFake()
	seed(f)
	srv := newTestServer(t, f, nil)
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		path string
	}{
		{"Last-Event-ID", map[string]string{"Last-Event-ID": "2"}, "/v1/tasks/t-1/events"},
		{"after", nil, "/v1/tasks/t-1/events?after=2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, lines := readSSE(t, srv.URL+tc.path, tc.hdr)
			var ids []string
			for _, l := range lines {
				if v, ok := strings.CutPrefix(l, "id: "); ok {
					ids = append(ids, v)
				}
			}
			if got := strings.Join(ids, ","); got != "3,4" {
				t.Errorf("resumed ids %s, want 3,4", got)
			}
		})
	}
}

func TestSSELiveWithHeartbeat(t *testing.T) {
	f := newFake()
	f.put(task.Status{TaskID: "t-1", State: task.StateRunning})
	srv := newTestServer(t, f, func(c *Config) { c.Heartbeat = time.Millisecond })
	resp, err := http.Get(srv.URL + "/v1/tasks/t-1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	next := func() string {
		if !sc.Scan() {
			t.Fatalf("stream ended early: %v", sc.Err())
		}
		return sc.Text()
	}
	for next() != ": heartbeat" {
	}
	// A live event arrives after the stream opened, then the result ends it.
	f.emit(task.Event{TaskID: "t-1", Kind: task.EventTurn, Turn: 7})
	for l := next(); !strings.HasPrefix(l, "data: "); l = next() {
	}
	f.emit(task.Event{TaskID: "t-1", Kind: task.EventResult, Result: &task.Result{Status: task.StateResolved}})
	sawResult := false
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"kind":"result"`) {
			sawResult = true
		}
	}
	if !sawResult {
		t.Error("no result event before the end of the stream")
	}
}
