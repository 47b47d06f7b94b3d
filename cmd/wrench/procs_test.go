package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// wrenchProc is the built wrench binary running as a separate process, as
// in production: `wrench serve` or `wrench worker`.
type wrenchProc struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer // stderr
	done chan struct{}
	err  error
}

// startProc starts wrenchBin with args; the test's cleanup kills it if it
// still runs.
func startProc(t testing.TB, name string, args ...string) *wrenchProc {
	t.Helper()
	return startProcEnv(t, name, nil, args...)
}

// startProcEnv is startProc with env added to the test's environment.
func startProcEnv(t testing.TB, name string, env []string, args ...string) *wrenchProc {
	t.Helper()
	p := &wrenchProc{name: name, cmd: exec.Command(wrenchBin, args...), out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Env = append(append(os.Environ(), "GOTRACEBACK=all"), env...)
	p.cmd.Stderr = p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		dumped := t.Failed() && p.quit()
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if dumped {
			before, dump, _ := strings.Cut(p.out.String(), "SIGQUIT: quit")
			t.Logf("%s stderr (last 4 kB before its goroutine dump):\n%s", name, tail(before, 4096))
			t.Logf("%s goroutines (wrench's, at the failure):\n%s", name, wrenchGoroutines(dump, 48<<10))
		} else if t.Failed() || os.Getenv("WRENCH_TEST_LOG") != "" {
			t.Logf("%s stderr (last 4 kB):\n%s", name, tail(p.out.String(), 4096))
		}
	})
	return p
}

// quit asks a process that still runs for its goroutine dump (SIGQUIT,
// as GOTRACEBACK=all prints it) and reports whether it exited within 10s.
func (p *wrenchProc) quit() bool {
	select {
	case <-p.done:
		return false
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
		return true
	case <-time.After(10 * time.Second):
		return false
	}
}

// framePointers matches the frame and stack pointers a crash dump adds to
// each line, which say nothing about where a goroutine waits.
var framePointers = regexp.MustCompile(` fp=0x[0-9a-f]+ sp=0x[0-9a-f]+ pc=0x[0-9a-f]+`)

// wrenchGoroutines keeps the goroutines of a dump that run wrench's own
// code, at most max bytes: what a hung process was doing.
func wrenchGoroutines(dump string, max int) string {
	return goroutinesWith(dump, max, "wrenchworks/wrench/")
}

// goroutinesWith keeps the goroutines of a dump whose stacks name any of
// marks, frame pointers dropped, at most max bytes.
func goroutinesWith(dump string, max int, marks ...string) string {
	var b strings.Builder
	for _, g := range strings.Split(dump, "\n\n") {
		g = framePointers.ReplaceAllString(g, "")
		if slices.ContainsFunc(marks, func(m string) bool { return strings.Contains(g, m) }) && b.Len()+len(g) < max {
			b.WriteString(g)
			b.WriteString("\n\n")
		}
	}
	return b.String()
}

// line waits until the process printed a line starting with prefix and
// returns the rest of it.
func (p *wrenchProc) line(t testing.TB, ctx context.Context, prefix string) string {
	t.Helper()
	for {
		for _, l := range strings.Split(p.out.String(), "\n") {
			if rest, ok := strings.CutPrefix(l, prefix); ok {
				return rest
			}
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited (%v) before printing %q:\n%s", p.name, p.err, prefix, tail(p.out.String(), 4096))
		case <-ctx.Done():
			t.Fatalf("%s never printed %q", p.name, prefix)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM and waits for the exit, bounded.
func (p *wrenchProc) stop(t testing.TB) error {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(2 * time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within 2m of SIGTERM", p.name)
	}
}

// kill sends SIGKILL and waits for the exit.
func (p *wrenchProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// startServeProc runs `wrench serve` with its NATS on a free port and
// returns the process, its API base URL and its NATS URL; natsSeed is
// the seed file workers sign in with.
func startServeProc(t testing.TB, ctx context.Context, args ...string) (p *wrenchProc, apiURL, natsURL, natsSeed string) {
	t.Helper()
	args = append([]string{"serve", "--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0", "--log-level", "info"}, args...)
	p = startProc(t, "serve", args...)
	natsURL = strings.TrimSpace(p.line(t, ctx, "wrench serve: NATS for workers at "))
	natsSeed = strings.TrimSpace(strings.TrimPrefix(p.line(t, ctx, "wrench serve: workers sign in with "), "--nats-nkey "))
	apiURL, _, _ = strings.Cut(p.line(t, ctx, "wrench serve: API on "), " ")
	return p, apiURL, natsURL, natsSeed
}

// helloRepo is a one-file git repository and a script that makes one bash
// call and finishes: the smallest real task.
func helloRepo(t testing.TB, delay time.Duration) (repo, script string) {
	t.Helper()
	dir := t.TempDir()
	repo = filepath.Join(dir, "repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "init", "-q", "-b", "main")
	git(t, repo, "add", "-A")
	git(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "initial")
	fault := ""
	if delay > 0 {
		// The model takes its time before the second reply: the agent
		// is blocked in a model call, its sandbox up.
		fault = fmt.Sprintf("\n    fault: {delay: %s}", delay)
	}
	script = filepath.Join(dir, "hello.yaml")
	body := `steps:
  - tool_calls:
      - name: bash
        arguments: {command: "echo hello-from-sandbox"}
  - expect_observation: "hello-from-sandbox"` + fault + `
    tool_calls:
      - name: finish
        arguments: {summary: "Said hello."}
`
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return repo, script
}

// helloTask is a task on helloRepo's repository and script.
func helloTask(id, repo, script string) task.Task {
	return task.Task{ID: id, Repo: task.Repo{URL: repo}, Instruction: "Say hello.", TestCommand: "true",
		Model: "scripted:" + script, Source: task.Source{Kind: "api"}}
}

// finalWrites counts, from the queue itself, how often each task was
// written final (in the state bucket's history) and how many result events
// were published for it. natsSeed "" connects without signing in.
func finalWrites(t testing.TB, ctx context.Context, natsURL, natsSeed string, ids []string) (finals, results map[string]int) {
	t.Helper()
	var opts []nats.Option
	if natsSeed != "" {
		signIn, err := nats.NkeyOptionFromSeed(natsSeed)
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, signIn)
	}
	js := natstest.Dial(t, natsURL, opts...)
	kv, err := js.KeyValue(ctx, queue.StateBucket)
	if err != nil {
		t.Fatal(err)
	}
	finals = map[string]int{}
	for _, id := range ids {
		// "task.<id>" is the state record's key; a record keeps its last
		// revisions, and none follows a final one.
		hist, err := kv.History(ctx, "task."+id)
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		for _, e := range hist {
			var st task.Status
			if json.Unmarshal(e.Value(), &st) == nil && st.State.Final() {
				finals[id]++
			}
		}
	}
	stream, err := js.Stream(ctx, queue.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	results = map[string]int{}
	for n := uint64(0); n < info.State.Msgs; {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			var ev task.Event
			if json.Unmarshal(m.Data(), &ev) == nil && ev.Kind == task.EventResult {
				results[ev.TaskID]++
			}
		}
		if got == 0 {
			t.Fatalf("read %d of %d events: %v", n, info.State.Msgs, batch.Error())
		}
		n += uint64(got)
	}
	return finals, results
}

// removeContainers force-removes whatever a failed test left of a
// deployment.
func removeContainers(deployment string) {
	out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=dev.wrench.deployment="+deployment).Output()
	if ids := strings.Fields(string(out)); len(ids) > 0 {
		_ = exec.Command("docker", append([]string{"rm", "-f"}, ids...)...).Run()
	}
}
