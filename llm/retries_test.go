package llm_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/llm"
	"github.com/wrenchworks/wrench/task"
)

// A server that answers 500 forever gets exactly the documented retries
// through the whole agent loop: the loop and the client used to retry on
// top of each other (20 requests where docs/agent.md says 3 retries).
func TestHostileModel_ServerErrorForeverThroughTheAgent(t *testing.T) {
	srv := startScript(t, "steps:\n  - {content: ok, fault: {status: 500, times: 1000}}\n")
	c, _ := newClient(t, srv.URL(), nil)
	var events []task.Event
	out, err := agent.New(agent.Config{}).Run(context.Background(), &agent.Run{
		Task:      task.Task{ID: "t-500", Instruction: "Fix it."},
		ModelName: "test-model", Model: c, Env: memenv.New(nil),
		EnvInfo: &agent.EnvInfo{GitState: "clean", OS: "Linux"},
		OnEvent: func(e task.Event) { events = append(events, e) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Requests()); n != 1+llm.DefaultMaxRetries || out.Reason != agent.StopModelError {
		t.Errorf("%d requests, reason %s; want %d and model_error", n, out.Reason, 1+llm.DefaultMaxRetries)
	}
	var told int
	for _, e := range events {
		if e.Kind == task.EventLog && strings.Contains(e.Text, "model call failed") {
			told++
		}
	}
	if told != llm.DefaultMaxRetries {
		t.Errorf("%d retry events, want one per retry (%d)", told, llm.DefaultMaxRetries)
	}
}

// docs/agent.md states the retry count and first backoff; they are the
// client's defaults.
func TestDocsMatchRetryDefaults(t *testing.T) {
	doc, err := os.ReadFile("../docs/agent.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`It makes \*\*(\d+)\*\* retries with exponential backoff starting at \*\*(\d+) s\*\*`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/agent.md no longer states the model retries")
	}
	if got, want := string(m[1]), fmt.Sprint(llm.DefaultMaxRetries); got != want {
		t.Errorf("docs say %s retries, the client makes %s", got, want)
	}
	if got, want := string(m[2]), fmt.Sprint(int(llm.DefaultBackoffBase/time.Second)); got != want {
		t.Errorf("docs say a first backoff of %s s, the client waits %s s", got, want)
	}
}
