package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/dispatcher"
	"github.com/wrenchworks/wrench/task"
)

// fakePatch is what the fake runner's resolved tasks produce.
const fakePatch = "--- a/calc.go\n+++ b/calc.go\n@@ -1 +1 @@\n-return a - b\n+return a + b\n"

// fakeRunner plays a short run and ends as the instruction says: resolve,
// unresolved, fail, reject, or block (until its ctx is done, or until
// release is closed, when it resolves).
func fakeRunner(release <-chan struct{}) dispatcher.Runner {
	return dispatcher.RunnerFunc(func(ctx context.Context, t task.Task, attempt int, onEvent func(task.Event)) task.Report {
		for _, ev := range []task.Event{
			{Kind: task.EventPhase, Phase: "sandbox", Text: " start"},
			{Kind: task.EventPhase, Phase: "sandbox", Text: " end"},
			{Kind: task.EventPhase, Phase: "agent", Text: " start"},
			{Kind: task.EventTurn, Turn: 1},
			{Kind: task.EventUsage, Model: "fake-model", Usage: &task.Usage{InputTokens: 1200, OutputTokens: 34, CostUSD: 0.0021, ModelCalls: 1}},
			{Kind: task.EventToolCall, Turn: 1, Tool: "bash", Text: "go test ./..."},
			{Kind: task.EventToolResult, Turn: 1, Tool: "bash", Text: "ok"},
		} {
			onEvent(ev)
		}
		res := task.Result{TaskID: t.ID, Attempt: attempt, Usage: task.Usage{InputTokens: 1200, OutputTokens: 34, Turns: 1, ToolCalls: 1},
			Timings: task.Timings{Agent: time.Second, Total: 2 * time.Second}}
		switch t.Instruction {
		case "resolve":
			res.Status, res.Patch = task.StateResolved, fakePatch
		case "unresolved":
			res.Status, res.Reason = task.StateUnresolved, "tests_failed"
		case "fail":
			res.Status, res.Reason = task.StateFailed, "clone: no such repository"
		case "reject":
			res.Status, res.Reason = task.StateRejected, "no test command"
		case "block":
			select {
			case <-ctx.Done():
				res.Status, res.Reason = task.StateCancelled, "cancelled"
			case <-release:
				res.Status, res.Patch = task.StateResolved, fakePatch
			}
		}
		onEvent(task.Event{Kind: task.EventPhase, Phase: "agent", Text: " end"})
		// Like the real worker, announce the result before the dispatcher
		// stores it: followers must not take the event for the final state.
		onEvent(task.Event{Kind: task.EventResult, State: res.Status, Result: &res})
		return task.Report{Result: res}
	})
}

// testServer is `wrench serve` running in-process with a fake runner.
type testServer struct {
	url    string
	stop   context.CancelFunc
	done   chan int
	stderr *syncBuffer
}

// syncBuffer is a bytes.Buffer safe for the server's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startServe(t *testing.T, dataDir, token string, runner dispatcher.Runner) *testServer {
	t.Helper()
	return startServeWith(t, dataDir, token, runner, nil)
}

// startServeWith is startServe with the flags changed by mod first.
func startServeWith(t *testing.T, dataDir, token string, runner dispatcher.Runner, mod func(*serveFlags)) *testServer {
	t.Helper()
	return startServeOn(t, "127.0.0.1:0", dataDir, token, runner, mod)
}

// startServeOn is startServeWith with the API listening on addr.
func startServeOn(t *testing.T, addr, dataDir, token string, runner dispatcher.Runner, mod func(*serveFlags)) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	url := "http://" + strings.Replace(ln.Addr().String(), "0.0.0.0", "127.0.0.1", 1)
	ts := &testServer{url: url, stop: cancel, done: make(chan int, 1), stderr: &syncBuffer{}}
	env := &cliEnv{stdin: strings.NewReader(""), stdout: io.Discard, stderr: ts.stderr, getenv: func(string) string { return "" }}
	f := serveFlags{httpAddr: ln.Addr().String(), token: token, maxBody: api.DefaultMaxBody,
		service: serviceFlags{common: commonFlags{dataDir: dataDir, logLevel: os.Getenv("WRENCH_TEST_LOG")}, slots: 2, verify: "finish",
			ackWait: time.Second}}
	if mod != nil {
		mod(&f)
	}
	go func() { ts.done <- serve(ctx, env, f, runner, ln) }()
	t.Cleanup(func() { ts.shutdown(t) })
	// Wait until the API answers ready (bounded by the test's timeout).
	for {
		resp, err := http.Get(ts.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return ts
			}
		}
		select {
		case code := <-ts.done:
			close(ts.done)
			t.Fatalf("serve exited with %d: %s", code, ts.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// shutdown stops the server as SIGTERM would and returns its exit code.
func (ts *testServer) shutdown(t *testing.T) int {
	t.Helper()
	ts.stop()
	code, ok := <-ts.done
	if !ok {
		return exitOK
	}
	close(ts.done)
	return code
}

// wrench runs a subcommand in-process and returns its exit code and output.
func wrench(t *testing.T, srv *testServer, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	env := &cliEnv{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr,
		getenv: func(k string) string {
			if k == "WRENCH_SERVER" && srv != nil {
				return srv.url
			}
			return ""
		}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := dispatch(ctx, env, args)
	return code, stdout.String(), stderr.String()
}

func TestServiceCommands(t *testing.T) {
	srv := startServe(t, t.TempDir(), "", fakeRunner(nil))

	// Exit codes of --wait follow the final state, like `wrench run`.
	for _, tc := range []struct {
		instruction string
		code        int
	}{
		{"resolve", exitOK}, {"unresolved", exitUnresolved}, {"reject", exitBadInput}, {"fail", exitInfra},
	} {
		t.Run("wait "+tc.instruction, func(t *testing.T) {
			code, out, errOut := wrench(t, srv, "submit", "--repo", "https://example.com/r.git", "--task", tc.instruction, "--wait")
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", code, tc.code, errOut)
			}
			if !strings.HasPrefix(out, "t-") {
				t.Errorf("stdout %q is not the task id", out)
			}
			if !strings.Contains(errOut, "wrench: ") {
				t.Errorf("no outcome line: %s", errOut)
			}
		})
	}

	t.Run("invalid task is exit 2 with the fields", func(t *testing.T) {
		code, _, errOut := wrench(t, srv, "submit", "--file", "-", "--json")
		if code != exitBadInput {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		code, _, errOut = wrench(t, srv, "submit", "--repo", "ftp://x", "--task", "x")
		if code != exitBadInput || !strings.Contains(errOut, "repo.url") {
			t.Errorf("exit %d: %s", code, errOut)
		}
	})

	// A task file, --follow (plain lines: stderr is not a terminal).
	dir := t.TempDir()
	file := filepath.Join(dir, "task.json")
	if err := os.WriteFile(file, []byte(`{"id":"t-file","repo":{"url":"https://example.com/r.git"},"instruction":"resolve"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := wrench(t, srv, "submit", "--file", file, "--follow")
	if code != exitOK || strings.TrimSpace(out) != "t-file" {
		t.Fatalf("follow: exit %d, stdout %q\n%s", code, out, errOut)
	}
	for _, want := range []string{"running", "→ bash", "1.2k tok", "$0.0021", "resolved"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("follow output lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, "\r") {
		t.Error("live-line redraws on a non-terminal")
	}

	// Resubmitting the same id is not a new task.
	code, _, errOut = wrench(t, srv, "submit", "--file", file)
	if code != exitOK || !strings.Contains(errOut, "already exists") {
		t.Errorf("duplicate: exit %d: %s", code, errOut)
	}

	// status --json, with flags after the id.
	code, out, _ = wrench(t, srv, "status", "t-file", "--json")
	var st task.Status
	if code != exitOK || json.Unmarshal([]byte(out), &st) != nil || st.State != task.StateResolved {
		t.Fatalf("status --json: exit %d: %s", code, out)
	}
	if code, out, _ = wrench(t, srv, "status", "t-file"); code != exitOK || !strings.Contains(out, "t-file  resolved") {
		t.Errorf("status: %d %s", code, out)
	}
	if code, _, errOut = wrench(t, srv, "status", "t-missing"); code != exitBadInput || !strings.Contains(errOut, "t-missing") {
		t.Errorf("status of unknown id: %d %s", code, errOut)
	}
	if code, _, _ = wrench(t, srv, "status"); code != exitBadInput {
		t.Errorf("status without id: %d", code)
	}

	// result: the patch on stdout, or into --patch FILE; --json.
	code, out, _ = wrench(t, srv, "result", "t-file")
	if code != exitOK || out != fakePatch {
		t.Errorf("result: exit %d, patch %q", code, out)
	}
	pf := filepath.Join(dir, "fix.patch")
	if code, out, _ = wrench(t, srv, "result", "--patch", pf, "t-file"); code != exitOK || out != "" {
		t.Errorf("result --patch: exit %d, stdout %q", code, out)
	}
	if b, _ := os.ReadFile(pf); string(b) != fakePatch {
		t.Errorf("patch file %q", b)
	}
	code, out, _ = wrench(t, srv, "result", "--json", "t-file")
	var res task.Result
	if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || res.Patch != fakePatch {
		t.Errorf("result --json: %d %s", code, out)
	}

	// watch a final task: its events, then its exit code.
	// Its progress and outcome are its output: on stdout, so they pipe.
	if code, out, errOut = wrench(t, srv, "watch", "t-file"); code != exitOK || !strings.Contains(out, "→ bash") ||
		!strings.Contains(out, "wrench: resolved") || errOut != "" {
		t.Errorf("watch: %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _ = wrench(t, srv, "watch", "--json", "t-file")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != exitOK || !strings.Contains(lines[len(lines)-1], `"kind":"result"`) {
		t.Errorf("watch --json: %d\n%s", code, out)
	}

	// list
	code, out, _ = wrench(t, srv, "list", "--state", "resolved", "--json")
	var lr api.ListResponse
	if code != exitOK || json.Unmarshal([]byte(out), &lr) != nil || len(lr.Tasks) != 2 {
		t.Errorf("list --json: %d %s", code, out)
	}
	if code, out, _ = wrench(t, srv, "list"); code != exitOK || !strings.Contains(out, "ID") || strings.Count(out, "\n") != 6 {
		t.Errorf("list: %d\n%s", code, out)
	}
	if code, _, errOut = wrench(t, srv, "list", "--state", "sleeping"); code != exitBadInput || !strings.Contains(errOut, "state") {
		t.Errorf("list bad state: %d %s", code, errOut)
	}

	// Metrics are served and counted.
	resp, err := http.Get(srv.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`wrench_tasks_submitted_total{source="cli"} 5`,
		`wrench_tasks_finished_total{status="resolved"} 2`,
		`wrench_model_tokens_total{model="fake-model",type="input"} 6000`,
		`wrench_tool_calls_total{outcome="ok",tool="bash"} 5`,
		`wrench_tasks_in_flight 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if path, err := exec.LookPath("promtool"); err == nil {
		cmd := exec.Command(path, "check", "metrics")
		cmd.Stdin = bytes.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	}
}

func TestServiceCancel(t *testing.T) {
	srv := startServe(t, t.TempDir(), "", fakeRunner(nil))
	code, out, errOut := wrench(t, srv, "submit", "--repo", "/r", "--task", "block")
	if code != exitOK {
		t.Fatalf("submit: %d %s", code, errOut)
	}
	id := strings.TrimSpace(out)
	// Wait until it runs, then cancel it and wait for the final state.
	c := api.NewClient(srv.url, "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = c.Events(ctx, id, 0, func(ev task.Event) error {
		if ev.Kind == task.EventTurn {
			return context.Canceled // running: stop following
		}
		return nil
	})
	if code, out, errOut = wrench(t, srv, "cancel", id); code != exitOK || !strings.Contains(out, id) {
		t.Fatalf("cancel: %d %s %s", code, out, errOut)
	}
	if code, out, errOut = wrench(t, srv, "watch", id); code != exitUnresolved || !strings.Contains(out+errOut, "cancelled") {
		t.Errorf("watch of a cancelled task: exit %d: %s%s", code, out, errOut)
	}
}

func TestServiceToken(t *testing.T) {
	srv := startServe(t, t.TempDir(), "s3cret-token", fakeRunner(nil))
	code, _, errOut := wrench(t, srv, "list")
	if code != exitBadInput || !strings.Contains(errOut, "WRENCH_API_TOKEN") {
		t.Errorf("no token: %d %s", code, errOut)
	}
	if code, _, errOut = wrench(t, srv, "list", "--token", "s3cret-token"); code != exitOK {
		t.Errorf("with token: %d %s", code, errOut)
	}
	if code, _, errOut = wrench(t, nil, "list", "--server", "http://127.0.0.1:1"); code != exitInfra || !strings.Contains(errOut, "cannot reach") {
		t.Errorf("no server: %d %s", code, errOut)
	}
}

func TestServeRefusesOpenAPIWithoutToken(t *testing.T) {
	code, _, errOut := wrench(t, nil, "serve", "--http", "0.0.0.0:0", "--data-dir", t.TempDir())
	if code != exitBadInput || !strings.Contains(errOut, "--token") || !strings.Contains(errOut, "WRENCH_API_TOKEN") {
		t.Errorf("exit %d: %s", code, errOut)
	}
	for _, addr := range []string{"127.0.0.1:7070", "[::1]:7070", "localhost:7070"} {
		if err := checkExposure(addr, ""); err != nil {
			t.Errorf("%s: %v", addr, err)
		}
	}
	if err := checkExposure(":7070", ""); err == nil {
		t.Error(":7070 listens on every interface but passed without a token")
	}
	if err := checkExposure("0.0.0.0:7070", "tok"); err != nil {
		t.Error(err)
	}
}
