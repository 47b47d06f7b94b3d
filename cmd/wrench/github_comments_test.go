package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// TestGitHubCommentsThroughBinary: tasks that end without a pull request
// tell their issue in plain words, through the built binary: one the model
// gives up on (unresolved) and one cancelled while it runs, each with the
// work so far.
func TestGitHubCommentsThroughBinary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	giveUp := writeScript(t, `final: "I cannot fix this."
steps:
  - tool_calls:
      - name: bash
        arguments: {command: "echo partial > PARTIAL && echo wrote-it"}
`)
	slow := writeScript(t, `steps:
  - tool_calls:
      - name: bash
        arguments: {command: "echo started > STARTED && echo wrote-it"}
  - expect_observation: "wrote-it"
    fault: {delay: 5m}
    tool_calls:
      - name: finish
        arguments: {summary: "never"}
`)
	h := newGHHarness(t, ctx, "calc", calcRepo(t), giveUp)
	w := h.startWorker(t, ctx, "w-u")
	comment := func(n int, kind string) string {
		var body string
		waitFor(t, ctx, "a comment on #"+itoa(n), func() bool {
			for _, c := range h.gh.Comments("acme", "calc", n) {
				if strings.Contains(c.Body, "kind="+kind+" -->") {
					body = c.Body
					return true
				}
			}
			return false
		})
		return body
	}

	id := h.comment(t, 20, 91001, "/wrench fix Add")
	body := comment(20, "result")
	for _, want := range []string{"Wrench did not solve this", "Status `unresolved`", "Work so far: the patch", "+partial"} {
		if !strings.Contains(body, want) {
			t.Errorf("unresolved task's comment lacks %q:\n%s", want, body)
		}
	}
	if st := h.status(t, ctx, id); st.State != task.StateUnresolved {
		t.Errorf("task %s is %s (%s), want unresolved", id, st.State, st.Reason)
	}

	if err := w.stop(t); err != nil {
		t.Errorf("w-u on SIGTERM: %v", err)
	}
	h.workerEnv = []string{"WRENCH_LLM_MODEL=scripted:" + slow}
	h.startWorker(t, ctx, "w-c")
	id = h.comment(t, 21, 91002, "/wrench fix Add")
	waitFor(t, ctx, "the agent to wait on the model", func() bool {
		st := h.status(t, ctx, id)
		return st.Progress != nil && st.Progress.LastTool == "bash"
	})
	if _, err := h.client.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	body = comment(21, "result")
	for _, want := range []string{"the task was cancelled", "Status `cancelled`"} {
		if !strings.Contains(body, want) {
			t.Errorf("cancelled task's comment lacks %q:\n%s", want, body)
		}
	}
	if n := len(h.gh.PullRequests("acme", "calc")); n != 0 {
		t.Errorf("%d pull requests, want none", n)
	}
}
