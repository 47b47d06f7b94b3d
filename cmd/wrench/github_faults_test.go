package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/github/githubtest"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// fixScript writes FIXED and finishes: a task with a change and no test
// command, so its pull request is a labelled draft.
func fixScript(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fix.yaml")
	body := `steps:
  - tool_calls:
      - name: bash
        arguments: {command: "echo fixed > FIXED && echo wrote-it"}
  - expect_observation: "wrote-it"
    tool_calls:
      - name: finish
        arguments: {summary: "Wrote FIXED."}
`
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGitHubPublishThroughBinary: a signed comment on an issue becomes a
// task that a worker process runs and publishes: one pull request, one
// comment.
func TestGitHubPublishThroughBinary(t *testing.T) {
	// The first task builds the repository's environment: in a CI run at
	// load 15-20 the task had not published after 5 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	h := newGHHarness(t, ctx, "hello", map[string]string{"README": "hello\n"}, fixScript(t))
	h.startWorker(t, ctx, "w-a")
	start := time.Now()
	id := h.comment(t, 5, 9001, "/wrench fix it")
	waitFor(t, ctx, "the pull request and its comment", func() bool {
		prs, cs := h.published(id, 5, "opened")
		return prs == 1 && cs == 1
	})
	t.Logf("webhook to pull request and comment: %s", time.Since(start))
}

// quietAfterResume is how long the stand-in GitHub must hear nothing
// after a stopped worker resumed before the next round: longer than the
// harness's --ack-wait (3s), which the resumed worker may wait behind the
// effects claim it lost before its last, stale request.
const quietAfterResume = 5 * time.Second

// faultRounds is how many times each fault runs (20; WRENCH_FAULT_ROUNDS
// overrides, e.g. for a quick local try).
func faultRounds() int {
	if n, err := strconv.Atoi(os.Getenv("WRENCH_FAULT_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 20
}

// effectStage names a request a worker makes while publishing.
type effectStage string

const (
	stagePush    effectStage = "push"
	stagePull    effectStage = "pull request"
	stageLabel   effectStage = "label"
	stageComment effectStage = "comment"
)

// is reports whether c is the stage's request for issue n.
// A pull request or label request counts only when it is for issue n's
// task (its branch): a stale request of an earlier round's resumed worker
// must not be taken for this round's.
func (s effectStage) is(c githubtest.Call, h *ghHarness, n int) bool {
	repo := "/repos/" + h.repo.Owner + "/" + h.repo.Name
	branch := fmt.Sprintf("wrench/gh-%s-%s-%d-", h.repo.Owner, h.repo.Name, n) // + the task id's hash
	switch s {
	case stagePush:
		return c.Git && c.Method == http.MethodPost && strings.HasSuffix(c.Path, "/git-receive-pack")
	case stagePull:
		return !c.Git && c.Method == http.MethodPost && c.Path == repo+"/pulls" && strings.Contains(string(c.Body), branch)
	case stageLabel:
		num, ok := strings.CutSuffix(strings.TrimPrefix(c.Path, repo+"/issues/"), "/labels")
		if c.Git || c.Method != http.MethodPost || !ok {
			return false
		}
		for _, pr := range h.gh.PullRequests(h.repo.Owner, h.repo.Name) {
			if strconv.Itoa(pr.Number) == num && strings.HasPrefix(pr.Head.Ref, branch) {
				return true
			}
		}
		return false
	case stageComment:
		return !c.Git && c.Method == http.MethodPost && c.Path == fmt.Sprintf("%s/issues/%d/comments", repo, n)
	}
	return false
}

// holdOnce holds the first request of stage for issue n until release is
// closed, and closes hooked when it arrives.
func holdOnce(h *ghHarness, stage effectStage, n int) (hooked, release chan struct{}) {
	hooked, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	h.gh.SetHook(func(c githubtest.Call) {
		if stage.is(c, h, n) {
			once.Do(func() {
				close(hooked)
				<-release
			})
		}
	})
	return hooked, release
}

// faultTask is a task published under a fault, checked at the end.
type faultTask struct {
	id    string
	issue int
	fault string
}

// TestGitHubEffectsUnderFaults runs the faults that make effects happen
// twice, each faultRounds() times, on worker processes sharing a NATS:
//
//   - a worker SIGSTOPped while publishing (at its push, pull request,
//     label or comment request), kept stopped past --ack-wait while the
//     other worker takes the task over, then SIGCONTed;
//   - a worker SIGKILLed between its push and its pull request (the pull
//     request made before it died, or not), and started again;
//   - duplicate deliveries (the task's message published three times, so
//     both workers run it at once; GitHub redelivering the webhook) and a
//     late one after the task is final.
//
// Every task ends with exactly one pull request, one comment on its issue
// and one label, every time.
func TestGitHubEffectsUnderFaults(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	h := newGHHarness(t, ctx, "hello", map[string]string{"README": "hello\n"}, fixScript(t))
	h.startWorker(t, ctx, "w-a")
	h.startWorker(t, ctx, "w-b")
	rounds := faultRounds()
	var done []faultTask
	// published waits for the pull request and its comment; a task that
	// ended other than resolved will never publish them, so t fails at once.
	published := func(t *testing.T, id string, n int) func() bool {
		return func() bool {
			if prs, cs := h.published(id, n, "opened"); prs >= 1 && cs >= 1 {
				return true
			}
			if st, err := h.client.Status(ctx, id); err == nil && st.State.Final() && st.State != task.StateResolved {
				t.Fatalf("%s ended %s (%s) instead of publishing", id, st.State, st.Reason)
			}
			return false
		}
	}

	t.Run("stopped past ack wait", func(t *testing.T) {
		stages := []effectStage{stagePush, stagePull, stageLabel, stageComment}
		for i := range rounds {
			n, stage := 100+i, stages[i%len(stages)]
			hooked, release := holdOnce(h, stage, n)
			id := h.comment(t, n, int64(50000+n), "/wrench fix it")
			select {
			case <-hooked:
			case <-ctx.Done():
				t.Fatalf("round %d: no %s request", i, stage)
			}
			victim := h.holder(t, ctx, id)
			victim.pause()
			close(release) // the request goes on; its sender sees nothing
			// Stopped until its delivery went to the other worker, which
			// took the effects claim over and finished.
			waitFor(t, ctx, "the other worker to take over and publish "+id, func() bool {
				token, released := h.claim(t, ctx, id)
				return token >= 2 && released && published(t, id, n)()
			})
			victim.resume()
			h.gh.SetHook(nil)
			// The resumed worker finishes what it was doing (its held
			// request's answer, then the effects claim it lost, which it
			// may wait up to --ack-wait for); a stale push of its arriving
			// after the next round's hook is set would be taken for that
			// round's.
			h.quiet(t, ctx, quietAfterResume)
			done = append(done, faultTask{id, n, "SIGSTOP at " + string(stage)})
		}
	})

	t.Run("killed between push and pull request", func(t *testing.T) {
		for i := range rounds {
			n := 200 + i
			made := i%2 == 0 // the pull request was made before the worker died
			if !made {
				h.gh.Inject(githubtest.Fault{Method: http.MethodPost, Path: "/repos/acme/hello/pulls", Status: http.StatusBadGateway})
			}
			hooked, release := holdOnce(h, stagePull, n)
			id := h.comment(t, n, int64(60000+n), "/wrench fix it")
			select {
			case <-hooked:
			case <-ctx.Done():
				t.Fatalf("round %d: no pull request request", i)
			}
			victim := h.holder(t, ctx, id)
			victim.kill()
			close(release)
			h.gh.SetHook(nil)
			h.startWorker(t, ctx, victim.name)
			waitFor(t, ctx, "the task to be published after the kill", published(t, id, n))
			done = append(done, faultTask{id, n, fmt.Sprintf("SIGKILL before the pull request (made: %v)", made)})
		}
	})

	t.Run("duplicate and late deliveries", func(t *testing.T) {
		js := h.js(t)
		for i := range rounds {
			n := 300 + i
			id := h.comment(t, n, int64(70000+n), "/wrench fix it")
			st := h.status(t, ctx, id)
			data, err := json.Marshal(st.Task)
			if err != nil {
				t.Fatal(err)
			}
			copyOf := func(k int) {
				if _, err := js.Publish(ctx, queue.TaskSubjectPrefix+id, data, jetstream.WithMsgID(fmt.Sprintf("%s-copy-%d", id, k))); err != nil {
					t.Fatal(err)
				}
			}
			copyOf(1)
			copyOf(2)
			issue := githubtest.Issue{Number: n, Title: "Fix the greeting", Body: "The repository does not say it is fixed."}
			again := githubtest.IssueCommentWithID(h.repo, issue, int64(70000+n), "created", githubtest.Actor{Login: "maintainer", Association: "OWNER"}, "/wrench fix it")
			if dup := h.deliver(t, "issue_comment", again, http.StatusOK); dup != id {
				t.Fatalf("webhook redelivery made %q, want the duplicate of %s", dup, id)
			}
			waitFor(t, ctx, "the task to be published", published(t, id, n))
			copyOf(3) // late: after the task is final
			done = append(done, faultTask{id, n, "duplicate and late deliveries"})
		}
	})

	// Let every paused, killed or late delivery play out, then count.
	waitFor(t, ctx, "the queue to drain", func() bool { return queueIdle(ctx, h.js(t)) })
	time.Sleep(3 * time.Second)
	js := h.js(t)
	kv, err := js.KeyValue(ctx, queue.StateBucket)
	if err != nil {
		t.Fatal(err)
	}
	duplicates, effects := 0, 0
	for _, ft := range done {
		prs, opened := h.published(ft.id, ft.issue, "opened")
		all := len(h.gh.Comments(h.repo.Owner, h.repo.Name, ft.issue))
		labels := 0
		for _, pr := range h.gh.PullRequests(h.repo.Owner, h.repo.Name) {
			if pr.Head.Ref == "wrench/"+ft.id {
				labels = len(h.gh.Labels(h.repo.Owner, h.repo.Name, pr.Number))
			}
		}
		if prs != 1 || opened != 1 || all != 1 || labels != 1 {
			t.Errorf("%s (%s): %d pull requests, %d comments (%d with the marker), %d labels; want one of each", ft.id, ft.fault, prs, all, opened, labels)
		}
		duplicates += max(prs-1, 0) + max(all-1, 0)
		keys, err := kv.ListKeysFiltered(ctx, "effects."+ft.id+".>")
		if err != nil {
			t.Fatal(err)
		}
		for k := range keys.Keys() {
			if !strings.HasSuffix(k, "._claim") {
				effects++
			}
		}
	}
	created, deleted := h.gh.CommentsCreated(), h.gh.CommentsDeleted()
	t.Logf("%d tasks under faults: %d duplicate effects left; %.1f effects recorded per task; %d comments created, %d of them duplicates deleted by their own late holder; %d pushes",
		len(done), duplicates, float64(effects)/float64(len(done)), created, deleted, h.gh.Pushes())
	if created-deleted != len(done) {
		t.Errorf("%d comments created and %d deleted for %d tasks", created, deleted, len(done))
	}
}

// claim reads task id's effects claim: its fencing token and whether its
// holder released it.
func (h *ghHarness) claim(t *testing.T, ctx context.Context, id string) (token uint64, released bool) {
	t.Helper()
	kv, err := h.js(t).KeyValue(ctx, queue.StateBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, "effects."+id+"._claim")
	if err != nil {
		return 0, false
	}
	var c struct {
		Token    uint64 `json:"token"`
		Released bool   `json:"released"`
	}
	_ = json.Unmarshal(e.Value(), &c)
	return c.Token, c.Released
}

// queueIdle reports whether the workers consumer has nothing pending or
// unacknowledged.
func queueIdle(ctx context.Context, js jetstream.JetStream) bool {
	c, err := js.Consumer(ctx, queue.TasksStream, queue.WorkersConsumer)
	if err != nil {
		return false
	}
	info, err := c.Info(ctx)
	return err == nil && info.NumPending == 0 && info.NumAckPending == 0
}

// quiet waits until the stand-in GitHub has had no request for d.
func (h *ghHarness) quiet(t *testing.T, ctx context.Context, d time.Duration) {
	t.Helper()
	count := func() int64 { return int64(len(h.gh.Requests())) + h.gh.GitRequests() }
	last, since := count(), time.Now()
	for time.Since(since) < d {
		select {
		case <-ctx.Done():
			t.Fatalf("the stand-in GitHub never went quiet for %s", d)
		case <-time.After(100 * time.Millisecond):
		}
		if n := count(); n != last {
			last, since = n, time.Now()
		}
	}
}
