package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/task"
)

// resumeScript appends s1…s6 to log.txt, one step each (a save point at
// turn 5), then waits on the model (where the test kills the worker),
// reads log.txt and checks every line is there: a run that resumed on a
// tree without the earlier attempt's lines would diverge.
const resumeScript = `steps:
  - tool_calls: [{name: bash, arguments: {command: "echo s1 >> log.txt"}}]
  - tool_calls: [{name: bash, arguments: {command: "echo s2 >> log.txt"}}]
  - tool_calls: [{name: bash, arguments: {command: "echo s3 >> log.txt"}}]
  - tool_calls: [{name: bash, arguments: {command: "echo s4 >> log.txt"}}]
  - tool_calls: [{name: bash, arguments: {command: "echo s5 >> log.txt"}}]
  - tool_calls: [{name: bash, arguments: {command: "echo s6 >> log.txt"}}]
  - fault: {delay: 4s}
    tool_calls: [{name: bash, arguments: {command: "cat log.txt"}}]
  - expect_observation: "s1\\ns2\\ns3\\ns4\\ns5\\ns6$"
    tool_calls: [{name: finish, arguments: {summary: "Logged six lines."}}]
`

// TestResumeAfterKilledWorker SIGKILLs a worker while its task's agent
// waits on the model at turn 7, then starts a worker in its place. With the
// built-in policy (resume: true) the new attempt restores the tree and the
// conversation saved at turn 5 and goes on from there; with resume: false
// it starts over. Both resolve with the same patch; the result of the
// resumed one says where it resumed and why, and both count every
// attempt's tokens. The difference is what resuming saved.
func TestResumeAfterKilledWorker(t *testing.T) {
	requireImage(t)
	resumed := killAndReplace(t, "")
	noResume := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(noResume, []byte("defaults:\n  resume: false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	over := killAndReplace(t, noResume)

	if want := "resumed at turn 5 after worker w-1 stopped responding on attempt 1"; resumed.Resumed != want {
		t.Errorf("resumed result says %q, want %q", resumed.Resumed, want)
	}
	if over.Resumed != "" {
		t.Errorf("with resume: false the result says %q", over.Resumed)
	}
	if resumed.Patch != over.Patch || !strings.Contains(resumed.Patch, "+s6") {
		t.Errorf("patches differ or lack the work:\nresumed:\n%s\nstarted over:\n%s", resumed.Patch, over.Patch)
	}
	if resumed.Usage.Turns != 8 || over.Usage.Turns != 8 {
		t.Errorf("turns %d and %d, want 8 (the conversation's)", resumed.Usage.Turns, over.Usage.Turns)
	}
	// The killed attempt's six calls count: 6+3 resumed, 6+8 started over.
	if resumed.Usage.ModelCalls != 9 || over.Usage.ModelCalls != 14 {
		t.Errorf("model calls %d and %d, want 9 and 14 (every attempt's)", resumed.Usage.ModelCalls, over.Usage.ModelCalls)
	}
	rt, ot := resumed.Usage.InputTokens+resumed.Usage.OutputTokens, over.Usage.InputTokens+over.Usage.OutputTokens
	if rt >= ot {
		t.Errorf("resuming used %d tokens, starting over %d: nothing saved", rt, ot)
	}
	t.Logf("tokens over both attempts: resumed %d (%d model calls), started over %d (%d model calls): resuming saved %d (%.0f%%)",
		rt, resumed.Usage.ModelCalls, ot, over.Usage.ModelCalls, ot-rt, 100*float64(ot-rt)/float64(ot))
}

// killAndReplace runs resumeScript's task on worker w-1 (with the policy
// file, if any), SIGKILLs it while the agent waits at turn 7, starts w-1
// again on the same data dir, and returns the task's result.
func killAndReplace(t *testing.T, policy string) task.Result {
	t.Helper()
	deployment := fmt.Sprintf("e2e-resume-%d", time.Now().UnixNano())
	t.Cleanup(func() { removeContainers(deployment) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, apiURL, natsURL, natsSeed := startServeProc(t, ctx, "--slots", "0", "--data-dir", t.TempDir(), "--deployment", deployment)
	data := t.TempDir()
	start := func() *wrenchProc {
		args := []string{"worker", "--nats", natsURL, "--nats-nkey", natsSeed, "--slots", "1", "--http", "", "--data-dir", data,
			"--deployment", deployment, "--worker-id", "w-1", "--ack-wait", "3s", "--log-level", "info"}
		if policy != "" {
			args = append(args, "--policy", policy)
		}
		p := startProc(t, "w-1", args...)
		p.line(t, ctx, "wrench worker: w-1 joined ")
		return p
	}
	w := start()

	repo, _ := helloRepo(t, 0)
	script := filepath.Join(t.TempDir(), "resume.yaml")
	if err := os.WriteFile(script, []byte(resumeScript), 0o644); err != nil {
		t.Fatal(err)
	}
	c := api.NewClient(apiURL, "")
	tk := helloTask("t-resume", repo, script)
	tk.Instruction = "Log six lines."
	if _, _, err := c.Submit(ctx, tk); err != nil {
		t.Fatal(err)
	}
	results := 0
	err := c.Events(ctx, tk.ID, 0, func(ev task.Event) error {
		if ev.Kind == task.EventToolResult {
			if results++; results == 6 {
				return context.Canceled // the agent now waits on step 7
			}
		}
		return nil
	})
	if err != context.Canceled {
		t.Fatalf("following the task: %v", err)
	}
	w.kill()
	w = start()
	if _, errOut, code := runWrench(t, ctx, []string{"WRENCH_SERVER=" + apiURL}, "watch", tk.ID); code != exitOK {
		t.Fatalf("watch: exit %d: %s", code, errOut)
	}
	st, err := c.Status(ctx, tk.ID)
	if err != nil || st.State != task.StateResolved || st.Result == nil || st.Result.Attempt != 2 {
		t.Fatalf("status %+v %v; want resolved on attempt 2", st, err)
	}
	var said []string
	if err := c.Events(ctx, tk.ID, 0, func(ev task.Event) error {
		if ev.Kind == task.EventResume {
			said = append(said, ev.Text)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := st.Result.Resumed; want != "" && (len(said) != 1 || said[0] != want) || want == "" && len(said) != 0 {
		t.Errorf("resume events %q, result says %q", said, want)
	}
	if err := w.stop(t); err != nil {
		t.Errorf("w-1 on SIGTERM: %v", err)
	}
	return *st.Result
}
