package main

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue/natsserver"
	"github.com/wrenchworks/wrench/task"
)

// TestCancelledQueuedTaskIsCounted: cancelling a queued task counts it once
// in wrench_tasks_finished_total{status="cancelled"}, however often the
// cancel is repeated.
func TestCancelledQueuedTaskIsCounted(t *testing.T) {
	ctx := context.Background()
	env := &cliEnv{stdout: io.Discard, stderr: io.Discard, getenv: noEnv}
	tel, err := newServiceTelemetry(ctx, env, serviceFlags{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer tel.shutdown()
	conn := natstest.Connect(t, natstest.Start(t, natsserver.Config{}))
	sub := countingSubmitter{Submissions: conn.Submissions(), m: tel.metrics}
	tk := task.Task{ID: "t-cancel", Repo: task.Repo{URL: "https://example.com/r.git"}, Instruction: "Fix Add."}
	if _, _, err := sub.Submit(ctx, tk); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		st, err := sub.Cancel(ctx, tk.ID)
		if err != nil || st.State != task.StateCancelled {
			t.Fatalf("cancel: %+v, %v", st, err)
		}
	}
	if n := finishedCount(t, tel, "cancelled"); n != 1 {
		t.Errorf("wrench_tasks_finished_total{status=\"cancelled\"} = %v, want 1", n)
	}
}

// finishedCount reads wrench_tasks_finished_total{status=status}.
func finishedCount(t *testing.T, tel *serviceTelemetry, status string) float64 {
	t.Helper()
	mfs, err := tel.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "wrench_tasks_finished_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "status" && l.GetValue() == status {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
