package telemetry

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wrenchworks/wrench/dispatcher"
	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/queue/natsserver"
	"github.com/wrenchworks/wrench/task"
)

// TestTraceFromSubmitToWorker submits a task inside a span and runs it
// through the real queue and dispatcher on an embedded NATS: the worker's
// task span belongs to the submitter's trace, the run's log lines carry the
// task id and trace id, and the metrics count the run.
func TestTraceFromSubmitToWorker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := natstest.Connect(t, natstest.Start(t, natsserver.Config{}), func(cfg *queue.Config) { cfg.Propagator = Propagator() })

	rec, tp := recorder()
	m := NewMetrics(prometheus.NewRegistry())
	var logs syncBuf
	log := slog.New(NewLogHandler(&logs, nil))
	done := make(chan struct{})
	runner := dispatcher.RunnerFunc(func(ctx context.Context, tk task.Task, attempt int, onEvent func(task.Event)) task.Report {
		log.InfoContext(ctx, "inside the run")
		evs := script(time.Now())
		for _, ev := range evs[:len(evs)-1] { // all but the result: the dispatcher sends that
			ev.Time = time.Time{}
			onEvent(ev)
		}
		return task.Report{Result: task.Result{TaskID: tk.ID, Status: task.StateResolved}}
	})
	obs := &doneObserver{Observer: NewObserver(m, NewTaskTracer(tp, TaskTracerConfig{}), nil), done: done}
	d, err := dispatcher.New(dispatcher.NATS(conn), runner, dispatcher.Config{Observer: obs, FetchWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	dctx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- d.Run(dctx) }()

	sctx, submit := tp.Tracer("test").Start(ctx, "submit")
	if _, _, err := conn.Submissions().Submit(sctx, task.Task{ID: "t-trace", Repo: task.Repo{URL: "/r"}, Instruction: "x"}); err != nil {
		t.Fatal(err)
	}
	submit.End()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("task did not finish")
	}
	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}

	var root bool
	for _, s := range rec.Ended() {
		if s.Name() != "task" {
			continue
		}
		root = true
		if s.SpanContext().TraceID() != submit.SpanContext().TraceID() {
			t.Errorf("task span in trace %s, submit in %s", s.SpanContext().TraceID(), submit.SpanContext().TraceID())
		}
	}
	if !root {
		t.Fatal("no task span")
	}
	if n := len(byName(rec.Ended())["chat gpt-4o"]); n != 2 {
		t.Errorf("%d chat spans, want 2", n)
	}
	line := logs.String()
	if !strings.Contains(line, `"task_id":"t-trace"`) || !strings.Contains(line, submit.SpanContext().TraceID().String()) {
		t.Errorf("run log line lacks task or trace id: %s", line)
	}
	if value(m.finished.WithLabelValues("resolved")) != 1 || value(m.inFlight) != 0 {
		t.Error("metrics did not count the run")
	}
}

// doneObserver signals when a task finished.
type doneObserver struct {
	*Observer
	done chan struct{}
}

func (o *doneObserver) TaskFinished(ctx context.Context, res task.Result, elapsed time.Duration) {
	o.Observer.TaskFinished(ctx, res, elapsed)
	close(o.done)
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
