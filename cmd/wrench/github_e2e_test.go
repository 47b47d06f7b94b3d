package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/github/githubtest"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// calcRepo is examples/go-calc cut down to one bug (Add subtracts) and no
// test of an empty Mean, with a .wrench.yaml naming its setup and tests.
func calcRepo(t *testing.T) map[string]string {
	t.Helper()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(moduleRoot(t), "examples", "go-calc", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	test := strings.Replace(read("calc_test.go"), "\tif got := Mean(nil); got != 0 {\n\t\tt.Errorf(\"Mean(nil) = %v, want 0\", got)\n\t}\n", "", 1)
	if strings.Contains(test, "Mean(nil)") {
		t.Fatal("examples/go-calc/calc_test.go changed: update calcRepo")
	}
	return map[string]string{
		"calc.go": read("calc.go"), "calc_test.go": test, "go.mod": read("go.mod"),
		".wrench.yaml": "setup: [\"go build ./...\"]\ntest: go test ./...\n",
	}
}

// writeScript writes a scripted model's script.
func writeScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "script.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const fixAddScript = `steps:
  - tool_calls:
      - name: bash
        arguments: {command: "go test ./..."}
  - expect_observation: "FAIL"
    tool_calls:
      - name: view
        arguments: {path: calc.go}
  - expect_observation: "return a - b"
    tool_calls:
      - name: edit
        arguments: {path: calc.go, old_string: "return a - b", new_string: "return a + b"}
  - tool_calls:
      - name: bash
        arguments: {command: "go test ./..."}
  - expect_observation: "ok"
    tool_calls:
      - name: finish
        arguments: {summary: "Add now adds."}
`

const emptyInputScript = `steps:
  - tool_calls:
      - name: view
        arguments: {path: calc.go}
      - name: view
        arguments: {path: calc_test.go}
  - expect_observation: "TestMean"
    tool_calls:
      - name: edit
        arguments:
          path: calc.go
          old_string: "\tvar sum float64\n"
          new_string: "\tif len(xs) == 0 {\n\t\treturn 0\n\t}\n\tvar sum float64\n"
      - name: edit
        arguments:
          path: calc_test.go
          old_string: "want 2\", got)\n\t}\n"
          new_string: "want 2\", got)\n\t}\n\tif got := Mean(nil); got != 0 {\n\t\tt.Errorf(\"Mean(nil) = %v, want 0\", got)\n\t}\n"
  - tool_calls:
      - name: bash
        arguments: {command: "go test ./..."}
  - expect_observation: "ok"
    tool_calls:
      - name: finish
        arguments: {summary: "Mean returns 0 for an empty input."}
`

// TestGitHubEndToEnd runs the GitHub path through the built binary: a
// signed `/wrench` comment on an issue becomes a task; its baseline
// fails, the scripted fix makes the tests pass, and Wrench pushes a
// branch, opens a pull request with the evidence table and comments on the
// issue. A reviewer's `/wrench also handle the empty input` in a review
// thread becomes a follow-up on the pull request's branch: a second commit
// on the same pull request, and the thread answered. Then more issues on
// the same repository (environment snapshot hits) measure the time from
// the webhook to the pull request.
func TestGitHubEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	fixAdd, emptyInput := writeScript(t, fixAddScript), writeScript(t, emptyInputScript)
	h := newGHHarness(t, ctx, "calc", calcRepo(t), fixAdd)
	w1 := h.startWorker(t, ctx, "w-1")

	id := h.comment(t, 12, 81001, "/wrench fix Add")
	waitFor(t, ctx, "the pull request and its comment", func() bool {
		if st := h.status(t, ctx, id); st.State.Final() && st.State != task.StateResolved {
			t.Fatalf("task %s: %s (%s)", id, st.State, st.Reason)
		}
		prs, cs := h.published(id, 12, "opened")
		return prs == 1 && cs == 1
	})
	st := h.status(t, ctx, id)
	r := st.Result
	if st.State != task.StateResolved || r.TestsBefore == nil || r.TestsBefore.Passed || r.TestsAfter == nil || !r.TestsAfter.Passed {
		t.Fatalf("task %s: %s, tests before %+v after %+v; want a failing baseline and passing tests", id, st.State, r.TestsBefore, r.TestsAfter)
	}
	var pr githubtest.PullRequest
	for _, p := range h.gh.PullRequests("acme", "calc") {
		if p.Head.Ref == "wrench/"+id {
			pr = p
		}
	}
	for _, want := range []string{"### Evidence", "| Test command | `go test ./...` |", "| Before the change | failed (exit 1)",
		"| After the change | passed", "| Failing tests that now pass | `TestAdd` |", "| Tests that newly fail | none |",
		"| Setup | snapshot ", "| Environment snapshot | `", "| Turns | ", "| Tokens | ", "| Cost | $", "| Time | ", "| Trajectory | `" + id + "/trajectory.jsonl`", "Closes #12"} {
		if !strings.Contains(pr.Body, want) {
			t.Errorf("pull request body lacks %q:\n%s", want, pr.Body)
		}
	}
	if pr.Draft || len(h.gh.Labels("acme", "calc", pr.Number)) != 0 {
		t.Errorf("a verified pull request is a draft (%v) or labelled (%v)", pr.Draft, h.gh.Labels("acme", "calc", pr.Number))
	}
	if got := h.gh.File(t, "acme", "calc", pr.Head.Ref, "calc.go"); !strings.Contains(got, "return a + b") {
		t.Errorf("the branch's calc.go:\n%s", got)
	}
	if u := h.status(t, ctx, id).Result.PullRequestURL; u != pr.HTMLURL {
		t.Errorf("result's pull_request_url %q, want %q", u, pr.HTMLURL)
	}

	// The review: a thread on calc.go, answered with /wrench.
	if err := w1.stop(t); err != nil {
		t.Errorf("w-1 on SIGTERM: %v", err)
	}
	h.workerEnv = []string{"WRENCH_LLM_MODEL=scripted:" + emptyInput}
	w2 := h.startWorker(t, ctx, "w-2")
	h.gh.SetPermission("acme", "calc", "alice", "write")
	head := pr.Head.SHA
	hunk := "@@ -9,6 +9,7 @@ func Mean(xs []float64) float64 {\n \tvar sum float64"
	root := h.gh.AddReviewComment("acme", "calc", pr.Number, "bob", "calc.go", 10, hunk, "Mean(nil) divides by zero.", 0)
	ask := h.gh.AddReviewComment("acme", "calc", pr.Number, "alice", "calc.go", 10, hunk, "/wrench also handle the empty input", root.ID)
	pr.Head.SHA = head
	fid := h.deliver(t, "pull_request_review_comment", githubtest.PullRequestReviewComment(h.repo, pr, ask), 201)
	var reply githubtest.ReviewComment
	waitFor(t, ctx, "the answer in the review thread", func() bool {
		for _, c := range h.gh.ReviewComments("acme", "calc", pr.Number) {
			if c.User.Login == "wrench[bot]" {
				reply = c
				return true
			}
		}
		return false
	})
	now, _ := h.gh.Branch("acme", "calc", pr.Head.Ref)
	if parent := strings.TrimSpace(h.gh.Git(t, "acme", "calc", "rev-parse", now+"^")); parent != head {
		t.Errorf("follow-up commit %s has parent %s, want the pull request's head %s", now, parent, head)
	}
	if got := h.gh.File(t, "acme", "calc", pr.Head.Ref, "calc.go"); !strings.Contains(got, "len(xs) == 0") || !strings.Contains(got, "return a + b") {
		t.Errorf("the branch after the follow-up:\n%s", got)
	}
	if reply.InReplyToID != root.ID || !strings.Contains(reply.Body, "Done: Wrench pushed "+now[:12]) || !strings.Contains(reply.Body, "passed") {
		t.Errorf("thread answer %+v", reply)
	}
	if n := len(h.gh.PullRequests("acme", "calc")); n != 1 {
		t.Errorf("%d pull requests after the follow-up, want the same one", n)
	}
	if fst := h.status(t, ctx, fid); fst.Task.Repo.Commit != head || fst.Task.Output.PullRequest.Number != pr.Number {
		t.Errorf("follow-up task %+v", fst.Task)
	}

	// Webhook to pull request, on the environment's snapshot.
	if err := w2.stop(t); err != nil {
		t.Errorf("w-2 on SIGTERM: %v", err)
	}
	h.workerEnv = []string{"WRENCH_LLM_MODEL=scripted:" + fixAdd}
	h.startWorker(t, ctx, "w-3")
	var took []time.Duration
	for i := range 7 {
		n := 40 + i
		start := time.Now()
		tid := h.comment(t, n, int64(82000+n), "/wrench fix Add")
		waitFor(t, ctx, "the pull request", func() bool { prs, _ := h.published(tid, n, "opened"); return prs == 1 })
		took = append(took, time.Since(start))
		if s := h.status(t, ctx, tid).Result.Setup; s == nil || s.Snapshot != task.SnapshotHit {
			t.Errorf("task %s: setup %+v, want a snapshot hit", tid, s)
		}
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	t.Logf("webhook received to pull request opened, snapshot hit: p50 %s (of %v)", took[len(took)/2], took)

	kv, err := h.js(t).KeyValue(ctx, queue.StateBucket)
	if err != nil {
		t.Fatal(err)
	}
	for _, tid := range []string{id, fid} {
		keys, err := kv.ListKeysFiltered(ctx, "effects."+tid+".>")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for k := range keys.Keys() {
			names = append(names, strings.TrimPrefix(k, "effects."+tid+"."))
		}
		sort.Strings(names)
		t.Logf("effects recorded for %s: %v", tid, names)
	}
	h.noTokens(t, ctx, id, fid)
	// Tokens live 20s, tasks longer: each process replaced its token
	// before GitHub would have refused it.
	if n := h.gh.TokensIssued(); n < 3 {
		t.Errorf("%d installation tokens minted over the test, want fresh ones as they expired", n)
	}
	for _, r := range h.gh.Requests() {
		if !r.Authorized {
			t.Errorf("%s %s was refused: an expired token was used", r.Method, r.Path)
		}
	}
}

// noTokens checks that no installation token the stand-in minted is in
// what Wrench wrote: every process's log, the tasks' states, results and
// events, their trajectories and logs, and the environment snapshots.
func (h *ghHarness) noTokens(t *testing.T, ctx context.Context, ids ...string) {
	t.Helper()
	tokens := h.gh.TokenValues()
	if len(tokens) == 0 {
		t.Fatal("no installation token was minted")
	}
	texts := map[string]string{"serve log": h.serve.out.String()}
	for name, p := range h.workers {
		texts[name+" log"] = p.out.String()
	}
	js := h.js(t)
	obj, err := js.ObjectStore(ctx, queue.ArtifactsBucket)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		st := h.status(t, ctx, id)
		b, _ := json.Marshal(st)
		texts[id+" status"] = string(b)
		for _, name := range st.Result.Artifacts {
			a, err := obj.GetBytes(ctx, id+"/"+name)
			if err != nil {
				t.Fatalf("artifact %s/%s: %v", id, name, err)
			}
			texts[id+"/"+name] = string(a)
		}
		if _, ok := texts[id+"/trajectory.jsonl"]; !ok {
			t.Errorf("%s stored no trajectory to check", id)
		}
	}
	for what, text := range texts {
		for _, tok := range tokens {
			if strings.Contains(text, tok) {
				t.Errorf("an installation token is in the %s", what)
			}
		}
	}
	images := h.snapshotImages(t)
	if len(images) == 0 {
		t.Error("no environment snapshot to check")
	}
	for _, img := range images {
		script := "grep -rlF"
		for _, tok := range tokens {
			script += " -e " + tok
		}
		script += " /workspace /home /tmp /root /etc 2>/dev/null; true"
		out, err := exec.CommandContext(ctx, "docker", "run", "--rm", "--network", "none", "--user", "0", "--entrypoint", "sh", img, "-c", script).CombinedOutput()
		if err != nil {
			t.Fatalf("look into %s: %v\n%s", img, err, out)
		}
		if s := strings.TrimSpace(string(out)); s != "" {
			t.Errorf("an installation token is in snapshot %s: %s", img, s)
		}
	}
}
