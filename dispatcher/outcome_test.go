package dispatcher

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// The ack mapping: how every way a run can end maps to the delivery's fate,
// without a server.
func TestDecide(t *testing.T) {
	cfg, err := Config{MaxDeliver: 3, Backoff: []time.Duration{time.Second, time.Minute}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	report := func(s task.State, reason string) task.Report {
		return task.Report{Result: task.Result{Status: s, Reason: reason}}
	}
	infra := func(reason string) task.Report {
		return task.Report{Result: task.Result{Status: task.StateFailed, Reason: reason}, Retry: true}
	}
	wrapped := func(e error) error { return fmt.Errorf("run: %w", e) }
	paused := task.Report{Result: task.Result{Status: task.StatePaused, Reason: "budget: repository r had spent …"},
		Pause: &task.Pause{Reason: task.ReasonBudget}}
	for _, c := range []struct {
		name       string
		rep        task.Report
		cause      error
		attempt    int
		want       action
		wantState  task.State
		wantReason string // substring of the result's reason or the requeue's
		wantDelay  time.Duration
	}{
		{"resolved", report(task.StateResolved, "done"), nil, 1, finish, task.StateResolved, "done", 0},
		{"unresolved", report(task.StateUnresolved, "tests fail"), nil, 1, finish, task.StateUnresolved, "tests fail", 0},
		{"task failure is final on any attempt", report(task.StateFailed, "clone: not found"), nil, 3, finish, task.StateFailed, "clone", 0},
		{"no final state", report(task.StateRunning, "oops"), nil, 1, finish, task.StateFailed, "runner returned no final state", 0},
		{"cancelled", report(task.StateUnresolved, "stopped"), errCancelled, 1, finish, task.StateCancelled, "cancelled", 0},
		{"cancelled after it resolved keeps the work", report(task.StateResolved, "done"), errCancelled, 1, finish, task.StateResolved, "done", 0},
		{"shutdown", report(task.StateCancelled, ""), errShutdown, 1, handBack, "", "worker shutdown", 0},
		{"shutdown on the last delivery", report(task.StateCancelled, ""), wrapped(errShutdown), 3, handBack, "", "worker shutdown", 0},
		{"shutdown after it resolved keeps the work", report(task.StateResolved, "done"), errShutdown, 1, finish, task.StateResolved, "done", 0},
		{"shutdown with a retry is handed back", infra("engine gone"), errShutdown, 1, handBack, "", "worker shutdown", 0},
		{"lost lease", report(task.StateResolved, "done"), errLostLease, 1, discard, "", "", 0},
		{"infrastructure fault", infra("docker: connection refused"), nil, 1, retry, "", "retry: docker: connection refused", time.Second},
		{"infrastructure fault, second attempt", infra("image missing"), nil, 2, retry, "", "retry: image missing", time.Minute},
		{"infrastructure fault without a reason", infra(""), nil, 1, retry, "", "unknown infrastructure fault", time.Second},
		{"infrastructure fault on the last delivery", infra("engine gone"), nil, 3, bury, task.StateFailed, "deliveries exhausted (3): engine gone", 0},
		{"paused by a budget", paused, nil, 3, pause, "", "budget: repository r", 0},
		{"paused, then cancelled", paused, errCancelled, 1, finish, task.StateCancelled, "cancelled", 0},
		{"paused at shutdown", paused, errShutdown, 1, handBack, "", "worker shutdown", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := decide(c.rep, c.cause, c.attempt, cfg, nil)
			if v.action != c.want {
				t.Fatalf("action = %v, want %v", v.action, c.want)
			}
			reason := v.reason
			if c.wantState != "" {
				if v.result.Status != c.wantState {
					t.Errorf("state = %q, want %q", v.result.Status, c.wantState)
				}
				reason = v.result.Reason
			}
			if !strings.Contains(reason, c.wantReason) {
				t.Errorf("reason = %q, want it to contain %q", reason, c.wantReason)
			}
			if v.delay != c.wantDelay {
				t.Errorf("delay = %s, want %s", v.delay, c.wantDelay)
			}
		})
	}
	if errors.Is(errShutdown, errCancelled) {
		t.Fatal("shutdown and cancellation must be told apart")
	}
}

// A fault of this worker's own infrastructure (local: its probe failed after
// the run) hands an infrastructure failure over, on any delivery; it does
// not touch a run that resolved, was cancelled or failed for another
// reason.
func TestDecideWorkerFault(t *testing.T) {
	cfg, err := Config{MaxDeliver: 3}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	local := errors.New("docker engine unreachable")
	infra := task.Report{Result: task.Result{Status: task.StateFailed, Fault: task.FaultInfra, Reason: "sandbox start"}, Retry: true}
	final := task.Report{Result: task.Result{Status: task.StateFailed, Fault: task.FaultInfra, Reason: "image missing"}}
	setup := task.Report{Result: task.Result{Status: task.StateFailed, Fault: task.FaultSetup, Reason: "setup_failed"}}
	done := task.Report{Result: task.Result{Status: task.StateResolved}}
	for _, c := range []struct {
		name    string
		rep     task.Report
		cause   error
		charged int
		want    action
	}{
		{"retry", infra, nil, 1, handOver},
		{"retry on the last delivery", infra, nil, 3, handOver},
		{"final infrastructure failure", final, nil, 1, handOver},
		{"the repository's setup", setup, nil, 1, finish},
		{"resolved", done, nil, 1, finish},
		{"cancelled", infra, errCancelled, 1, finish},
		{"shutdown", infra, errShutdown, 1, handBack},
	} {
		v := decide(c.rep, c.cause, c.charged, cfg, local)
		if v.action != c.want {
			t.Errorf("%s: action = %v, want %v", c.name, v.action, c.want)
		}
		if v.action == handOver && !strings.Contains(v.reason, "worker fault: docker engine unreachable") {
			t.Errorf("%s: reason %q", c.name, v.reason)
		}
	}
}
