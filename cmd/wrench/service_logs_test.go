package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/wrenchworks/wrench/api"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it keeps the trace id of
// every span it is sent, by span name and task id (wrench.task.id).
type otlpReceiver struct {
	mu    sync.Mutex
	spans []receivedSpan
}

type receivedSpan struct {
	name, traceID, taskID string
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				rec := receivedSpan{name: s.GetName(), traceID: hex.EncodeToString(s.GetTraceId())}
				for _, a := range s.GetAttributes() {
					if a.GetKey() == "wrench.task.id" {
						rec.taskID = a.GetValue().GetStringValue()
					}
				}
				o.spans = append(o.spans, rec)
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(nil)
}

// taskLines counts the JSON log lines of task id in out by message.
func taskLines(out, id string) map[string]int {
	n := map[string]int{}
	for _, l := range strings.Split(out, "\n") {
		var rec struct {
			Msg    string `json:"msg"`
			TaskID string `json:"task_id"`
		}
		if strings.HasPrefix(l, "{") && json.Unmarshal([]byte(l), &rec) == nil && rec.TaskID == id {
			n[rec.Msg]++
		}
	}
	return n
}

// traceOf returns the trace ids of the spans named name for task id.
func (o *otlpReceiver) traceOf(name, id string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, s := range o.spans {
		if s.name == name && s.taskID == id {
			out = append(out, s.traceID)
		}
	}
	return out
}

// TestServiceLogLinesCarryTheTaskTrace runs a task through `wrench serve`
// as deployed (the built binary, its embedded NATS, the real worker with
// Docker and the scripted model, traces to an OTLP receiver, JSON logs at
// debug) and checks docs/operations.md "Logs": every log line that says
// the task's task_id (the API's submission, the dispatcher, the worker,
// the workspace, the sandbox) says the trace_id of the task's spans. The
// task is awaited through the log, not the API: a request that reads a
// task has a trace of its own.
func TestServiceLogLinesCarryTheTaskTrace(t *testing.T) {
	requireImage(t)
	deployment := fmt.Sprintf("logs-%d", time.Now().UnixNano())
	t.Cleanup(func() { removeContainers(deployment) })
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	recv := &otlpReceiver{}
	collector := httptest.NewServer(recv)
	defer collector.Close()

	srv, apiURL, _, _ := startServeProc(t, ctx, "--slots", "1", "--data-dir", t.TempDir(), "--deployment", deployment,
		"--otlp-endpoint", collector.URL, "--log-level", "debug")
	repo, script := helloRepo(t, 0)
	const id = "t-logs-trace"
	if _, _, err := api.NewClient(apiURL, "").Submit(ctx, helloTask(id, repo, script)); err != nil {
		t.Fatal(err)
	}
	for taskLines(srv.out.String(), id)["task finished"] == 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("no \"task finished\" line of %s in serve's log", id)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := srv.stop(t); err != nil { // flushes the spans
		t.Fatalf("serve on SIGTERM: %v", err)
	}

	traces := recv.traceOf("task", id)
	if len(traces) != 1 {
		t.Fatalf("task spans of %s in traces %v; want one", id, traces)
	}
	want := traces[0]
	lines := 0
	for _, l := range strings.Split(srv.out.String(), "\n") {
		var rec map[string]any
		if !strings.HasPrefix(l, "{") || json.Unmarshal([]byte(l), &rec) != nil || rec["task_id"] != id {
			continue
		}
		lines++
		if rec["trace_id"] != want {
			t.Errorf("line says trace_id %v, the task's spans %s: %s", rec["trace_id"], want, l)
		}
		if n := strings.Count(l, `"task_id"`); n != 1 {
			t.Errorf("task_id %d times: %s", n, l)
		}
	}
	// The lines a task's life always has, from each part that logs it.
	byMsg := taskLines(srv.out.String(), id)
	for _, msg := range []string{"http request", "task started", "sandbox ready", "attempt finished", "task finished"} {
		if byMsg[msg] == 0 {
			t.Errorf("no %q line for %s (lines by message: %v)", msg, id, byMsg)
		}
	}
	t.Logf("%d lines of %s, all in trace %s: %v", lines, id, want, byMsg)
}
