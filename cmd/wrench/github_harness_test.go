package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/github/githubtest"
	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/task"
)

// ghHarness is Wrench serving GitHub as in production, every part real but
// GitHub and the model: the stand-in GitHub (REST and git over https, a
// GitHub App with short-lived installation tokens), `wrench serve` taking
// the webhook (no slots, NATS for workers), and `wrench worker` processes
// that run tasks in Docker with the scripted model and publish results.
type ghHarness struct {
	top        *testing.T // owns the processes: they outlive subtests
	gh         *githubtest.Server
	repo       githubtest.Repo
	secret     []byte
	deployment string
	ghFlags    []string // the GitHub flags every process gets
	serve      *wrenchProc
	apiURL     string
	natsURL    string
	natsSeed   string // the file workers sign in to NATS with
	client     *api.Client
	workers    map[string]*wrenchProc
	dataDirs   map[string]string
	workerEnv  []string
	ackWait    string
}

// tokenTTL is how long the stand-in's installation tokens live in harness
// tests: shorter than a task, so every publish needs a fresh one.
const tokenTTL = 20 * time.Second

// newGHHarness starts the stand-in with repository acme/<name> holding
// files, and `wrench serve`; script is what workers' model plays.
func newGHHarness(t *testing.T, ctx context.Context, name string, files map[string]string, script string) *ghHarness {
	t.Helper()
	requireImage(t)
	h := &ghHarness{top: t, secret: []byte("harness-webhook-secret"), workers: map[string]*wrenchProc{}, dataDirs: map[string]string{},
		deployment: fmt.Sprintf("gh-%s-%d", name, time.Now().UnixNano()), ackWait: "3s"}
	t.Cleanup(func() {
		removeContainers(h.deployment)
		removeImages(h.deployment)
	})
	h.gh = githubtest.New(t, "ghs_unusedStaticToken")
	t.Cleanup(func() {
		if t.Failed() {
			buf := make([]byte, 4<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Logf("the stand-in GitHub's goroutines at the failure:\n%s", serverGoroutines(string(buf)))
		}
	})
	app := h.gh.EnableApp(t, 7070, nil)
	h.gh.Install("acme", nil)
	h.gh.SetTokenTTL(tokenTTL)
	h.repo = h.gh.AddRepo(t, "acme", name, files)
	dir := t.TempDir()
	key, ca := filepath.Join(dir, "app.pem"), filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(key, app.PrivateKeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca, h.gh.CA(), 0o644); err != nil {
		t.Fatal(err)
	}
	h.ghFlags = []string{"--github-api", h.gh.APIURL(), "--github-ca", ca, "--github-app-id", "7070", "--github-app-key", key}
	h.workerEnv = []string{"WRENCH_LLM_MODEL=scripted:" + script, "GITHUB_TOKEN=", "WRENCH_GIT_TOKEN="}
	args := append([]string{"--slots", "0", "--data-dir", t.TempDir(), "--deployment", h.deployment,
		"--github-webhook-secret", string(h.secret)}, h.ghFlags...)
	h.serve, h.apiURL, h.natsURL, h.natsSeed = startServeProc(t, ctx, args...)
	h.client = api.NewClient(h.apiURL, "")
	return h
}

// serverGoroutines keeps the goroutines of a dump that serve the stand-in
// GitHub's requests (its REST handlers and git-http-backend): where a
// worker's request waits, when it does.
func serverGoroutines(dump string) string {
	return goroutinesWith(dump, 32<<10, "githubtest.", "net/http/cgi")
}

// startWorker starts (or restarts, on the same data dir) worker id; it
// runs until the harness's test ends.
func (h *ghHarness) startWorker(t *testing.T, ctx context.Context, id string) *wrenchProc {
	t.Helper()
	if h.dataDirs[id] == "" {
		h.dataDirs[id] = t.TempDir()
	}
	args := append([]string{"worker", "--nats", h.natsURL, "--nats-nkey", h.natsSeed, "--slots", "1", "--http", "", "--data-dir", h.dataDirs[id],
		"--deployment", h.deployment, "--worker-id", id, "--ack-wait", h.ackWait, "--log-level", "info"}, h.ghFlags...)
	p := startProcEnv(h.top, id, h.workerEnv, args...)
	p.line(t, ctx, "wrench worker: "+id+" joined ")
	h.workers[id] = p
	return p
}

// comment delivers a signed `issue_comment` for comment id with body on
// issue n, as GitHub would, and returns the task id it queued.
func (h *ghHarness) comment(t *testing.T, n int, id int64, body string) string {
	t.Helper()
	issue := githubtest.Issue{Number: n, Title: "Fix the greeting", Body: "The repository does not say it is fixed."}
	payload := githubtest.IssueCommentWithID(h.repo, issue, id, "created", githubtest.Actor{Login: "maintainer", Association: "OWNER"}, body)
	return h.deliver(t, "issue_comment", payload, http.StatusCreated)
}

// deliver posts a signed delivery to serve's webhook and returns the task
// id of the answer, which must have status code want.
func (h *ghHarness) deliver(t *testing.T, event string, payload []byte, want int) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.apiURL+"/webhooks/github", bytes.NewReader(payload))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("d-%d", time.Now().UnixNano()))
	req.Header.Set("X-Hub-Signature-256", githubtest.Sign(h.secret, payload))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a struct {
		Status string `json:"status"`
		TaskID string `json:"task_id"`
		Reason string `json:"reason"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&a)
	if resp.StatusCode != want {
		t.Fatalf("webhook %s answered %d %+v, want %d", event, resp.StatusCode, a, want)
	}
	return a.TaskID
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// published reports the pull requests of task id's branch and the comments
// on issue n carrying kind's marker for the task.
func (h *ghHarness) published(id string, n int, kind string) (prs, comments int) {
	for _, pr := range h.gh.PullRequests(h.repo.Owner, h.repo.Name) {
		if pr.Head.Ref == "wrench/"+id {
			prs++
		}
	}
	m := fmt.Sprintf("<!-- wrench:task=%s kind=%s -->", id, kind)
	for _, c := range h.gh.Comments(h.repo.Owner, h.repo.Name, n) {
		if strings.Contains(c.Body, m) {
			comments++
		}
	}
	return prs, comments
}

// holder returns the worker that ran task id (and publishes it first).
func (h *ghHarness) holder(t *testing.T, ctx context.Context, id string) *wrenchProc {
	t.Helper()
	st, err := h.client.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	p := h.workers[st.Worker]
	if p == nil {
		t.Fatalf("task %s ran on %q, not a harness worker", id, st.Worker)
	}
	return p
}

// status returns task id's status.
func (h *ghHarness) status(t *testing.T, ctx context.Context, id string) task.Status {
	t.Helper()
	st, err := h.client.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// stop and resume a process: SIGSTOP and SIGCONT.
func (p *wrenchProc) pause()  { _ = p.cmd.Process.Signal(syscall.SIGSTOP) }
func (p *wrenchProc) resume() { _ = p.cmd.Process.Signal(syscall.SIGCONT) }

func itoa(n int) string { return strconv.Itoa(n) }

// removeImages removes the environment snapshots a deployment made.
func removeImages(deployment string) {
	out, _ := exec.Command("docker", "images", "-q", "--filter", "label=dev.wrench.deployment="+deployment).Output()
	if ids := strings.Fields(string(out)); len(ids) > 0 {
		_ = exec.Command("docker", append([]string{"rmi", "-f"}, ids...)...).Run()
	}
}

// snapshotImages lists the environment snapshots of the harness's
// deployment.
func (h *ghHarness) snapshotImages(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("docker", "images", "--format", "{{.Repository}}:{{.Tag}}", "--filter", "label=dev.wrench.deployment="+h.deployment).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(out))
}

// js is a raw JetStream handle on the harness's NATS, signed in as a
// worker.
func (h *ghHarness) js(t *testing.T) jetstream.JetStream {
	t.Helper()
	signIn, err := nats.NkeyOptionFromSeed(h.natsSeed)
	if err != nil {
		t.Fatal(err)
	}
	return natstest.Dial(t, h.natsURL, signIn)
}
