package dispatcher_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/wrenchworks/wrench/dispatcher"
	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/queue/natsserver"
	"github.com/wrenchworks/wrench/task"
)

// The test binary doubles as a worker process and as a NATS server process,
// so tests can SIGKILL them.
const helperEnv = "WRENCH_DISPATCHER_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "worker":
		os.Exit(helperWorker())
	case "nats":
		os.Exit(helperNATS())
	}
	os.Exit(m.Run())
}

// helperWorker runs a dispatcher whose fake runner appends "id attempt" to
// WRENCH_RUN_LOG, then sleeps WRENCH_RUN_SLEEP ("forever" until cancelled)
// and resolves. It stops gracefully on SIGTERM.
func helperWorker() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	conn, err := queue.Connect(ctx, queue.Config{URL: os.Getenv("WRENCH_NATS_URL")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer conn.Close()
	sleep := os.Getenv("WRENCH_RUN_SLEEP")
	runLog := os.Getenv("WRENCH_RUN_LOG")
	r := dispatcher.RunnerFunc(func(ctx context.Context, t task.Task, attempt int, _ func(task.Event)) task.Report {
		f, err := os.OpenFile(runLog, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			fmt.Fprintf(f, "%s %d\n", t.ID, attempt)
			f.Close()
		}
		if sleep == "forever" {
			<-ctx.Done()
			return task.Report{Result: task.Result{Status: task.StateCancelled}}
		}
		d, _ := time.ParseDuration(sleep)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return task.Report{Result: task.Result{Status: task.StateCancelled}}
		}
		return resolved(t)
	})
	slots, _ := strconv.Atoi(os.Getenv("WRENCH_SLOTS"))
	ackWait, _ := time.ParseDuration(os.Getenv("WRENCH_ACK_WAIT"))
	d, err := dispatcher.New(dispatcher.NATS(conn), r, dispatcher.Config{
		Slots: slots, WorkerID: os.Getenv("WRENCH_WORKER_ID"), AckWait: ackWait, FetchWait: 200 * time.Millisecond,
		Caps: parseCaps(os.Getenv("WRENCH_TENANT_LIMITS")),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := d.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// helperNATS serves JetStream on WRENCH_NATS_LISTEN from WRENCH_NATS_DIR
// until killed, and prints "ready" once it accepts connections.
func helperNATS() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	e, err := natsserver.Start(ctx, natsserver.Config{DataDir: os.Getenv("WRENCH_NATS_DIR"), Listen: os.Getenv("WRENCH_NATS_LISTEN")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	<-ctx.Done()
	e.Shutdown()
	return 0
}

// process is a child process started by a test.
type process struct {
	cmd  *exec.Cmd
	done chan error
}

func (p *process) kill(t testing.TB) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// term sends SIGTERM and returns the exit error.
func (p *process) term() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	return <-p.done
}

func startHelper(t testing.TB, mode string, env ...string) *process {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{helperEnv + "=" + mode}, env...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, done: make(chan error, 1)}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(ready)
			}
		}
		p.done <- cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	})
	if mode == "nats" {
		select {
		case <-ready:
		case err := <-p.done:
			t.Fatalf("nats helper exited: %v", err)
		case <-time.After(waitLimit):
			t.Fatal("nats helper not ready")
		}
	}
	return p
}

func startWorkerProcess(t testing.TB, url, id, sleep, runLog string, slots int, ackWait time.Duration) *process {
	return startHelper(t, "worker",
		"WRENCH_NATS_URL="+url, "WRENCH_WORKER_ID="+id, "WRENCH_RUN_SLEEP="+sleep,
		"WRENCH_RUN_LOG="+runLog, "WRENCH_SLOTS="+strconv.Itoa(slots), "WRENCH_ACK_WAIT="+ackWait.String())
}

// runLines reads a run log: task id -> attempts run.
func runLines(t testing.TB, files ...string) map[string][]string {
	t.Helper()
	runs := map[string][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if id, attempt, ok := strings.Cut(line, " "); ok {
				runs[id] = append(runs[id], attempt)
			}
		}
	}
	return runs
}

// eventCounts is how many events each task has in the event stream.
func eventCounts(t testing.TB, js jetstream.JetStream) map[string]uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), queue.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background(), jetstreamSubjectFilter(queue.EventSubjectPrefix+">"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for subj, n := range info.State.Subjects {
		out[strings.TrimPrefix(subj, queue.EventSubjectPrefix)] = n
	}
	return out
}

// finalWrites counts the final states among the kept revisions of a task's
// state record.
func finalWrites(t testing.TB, js jetstream.JetStream, id string) int {
	t.Helper()
	kv, err := js.KeyValue(context.Background(), queue.StateBucket)
	if err != nil {
		t.Fatal(err)
	}
	hist, err := kv.History(context.Background(), "task."+id)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range hist {
		var st task.Status
		if err := jsonUnmarshal(e.Value(), &st); err == nil && st.State.Final() {
			n++
		}
	}
	return n
}

func TestSIGKILLWorkerProcessMidTask(t *testing.T) {
	e := startNATS(t, "127.0.0.1:0")
	c := connect(t, e)
	dir := t.TempDir()
	childLog := filepath.Join(dir, "child.log")
	child := startWorkerProcess(t, e.ClientURL(), "child", "forever", childLog, 1, time.Second)
	tk := newTask("t-kill")
	submit(t, c, tk)
	waitFor(t, "the child to run the task", func() bool {
		st, err := c.States().Status(context.Background(), tk.ID)
		return err == nil && st.State == task.StateRunning && st.Worker == "child" && len(runLines(t, childLog)[tk.ID]) == 1
	})
	child.kill(t)

	r := newFakeRunner()
	runDispatcher(t, newDispatcher(t, c, r, dispatcher.Config{WorkerID: "survivor", AckWait: time.Second}))
	st := waitFinal(t, c, tk.ID)
	if st.State != task.StateResolved || st.Result.Worker != "survivor" || st.Attempt != 2 {
		t.Fatalf("status = %+v", st)
	}
	if got := runLines(t, childLog)[tk.ID]; len(got) != 1 {
		t.Fatalf("child runs = %v, want 1", got)
	}
	if got := r.runs(tk.ID); len(got) != 1 {
		t.Fatalf("survivor runs = %v, want 1", got)
	}
	if n := finalWrites(t, natstest.JetStream(t, e), tk.ID); n != 1 {
		t.Fatalf("%d final writes, want 1", n)
	}
	waitFor(t, "the message to be acked", func() bool { return natstest.StreamMsgs(t, e, queue.TasksStream) == 0 })
}

// The fake-runner version of "100 tasks over 2 worker processes"; the lead's
// worker package repeats it with the real worker and Docker.
func TestHundredTasksOverTwoWorkerProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns worker processes")
	}
	e := startNATS(t, "127.0.0.1:0")
	c := connect(t, e)
	dir := t.TempDir()
	logs := []string{filepath.Join(dir, "w1.log"), filepath.Join(dir, "w2.log")}
	w1 := startWorkerProcess(t, e.ClientURL(), "w1", "20ms", logs[0], 4, 5*time.Second)
	w2 := startWorkerProcess(t, e.ClientURL(), "w2", "20ms", logs[1], 4, 5*time.Second)
	const n = 100
	for i := range n {
		submit(t, c, newTask(fmt.Sprintf("t-%03d", i)))
	}
	byWorker := map[string]int{}
	for i := range n {
		st := waitFinal(t, c, fmt.Sprintf("t-%03d", i))
		if st.State != task.StateResolved {
			t.Fatalf("%s: %+v", st.TaskID, st)
		}
		byWorker[st.Result.Worker]++
	}
	for _, w := range []*process{w1, w2} {
		if err := w.term(); err != nil {
			t.Fatalf("worker exit after SIGTERM: %v", err)
		}
	}
	runs := runLines(t, logs...)
	counts := eventCounts(t, natstest.JetStream(t, e))
	for i := range n {
		id := fmt.Sprintf("t-%03d", i)
		if len(runs[id]) != 1 {
			t.Errorf("%s ran %d times", id, len(runs[id]))
		}
		// queued, running, result: one of each.
		if counts[id] != 3 {
			t.Errorf("%s has %d events, want 3", id, counts[id])
		}
	}
	if natstest.StreamMsgs(t, e, queue.TasksStream) != 0 {
		t.Error("task stream not empty")
	}
	t.Logf("work split: %v", byWorker)
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
