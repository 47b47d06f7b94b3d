package worker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

func testTask() task.Task {
	return task.Task{ID: "t1", Repo: task.Repo{URL: "/src/r"}, Instruction: "fix", TestCommand: "go test ./..."}
}

func TestRunOutcomes(t *testing.T) {
	cases := []struct {
		name       string
		mutate     func(*task.Task)
		wsErr      error
		sbErr      error
		modelErr   error
		agent      func(p *fakeProvider) *fakeAgent
		wantStatus task.State
		wantRetry  bool
		wantReason string
		wantPatch  bool
	}{
		{name: "fixed and tests pass", agent: func(p *fakeProvider) *fakeAgent { return &fakeAgent{reason: agent.StopFinished, fix: p} },
			wantStatus: task.StateResolved, wantPatch: true},
		{name: "finished but tests fail", agent: func(*fakeProvider) *fakeAgent { return &fakeAgent{reason: agent.StopFinished} },
			wantStatus: task.StateUnresolved, wantReason: "tests fail", wantPatch: true},
		{name: "no test command, finished", mutate: func(t *task.Task) { t.TestCommand = "" },
			agent:      func(*fakeProvider) *fakeAgent { return &fakeAgent{reason: agent.StopFinished} },
			wantStatus: task.StateResolved, wantPatch: true},
		{name: "no test command, max turns", mutate: func(t *task.Task) { t.TestCommand = "" },
			agent:      func(*fakeProvider) *fakeAgent { return &fakeAgent{reason: agent.StopMaxTurns} },
			wantStatus: task.StateUnresolved, wantReason: "max_turns", wantPatch: true},
		{name: "loop detected keeps partial work", agent: func(*fakeProvider) *fakeAgent { return &fakeAgent{reason: agent.StopLoopDetected} },
			wantStatus: task.StateUnresolved, wantReason: "loop_detected", wantPatch: true},
		{name: "model error", agent: func(*fakeProvider) *fakeAgent {
			return &fakeAgent{reason: agent.StopModelError, err: &agent.ModelError{Kind: agent.ModelServer, Err: errBoom}}
		}, wantStatus: task.StateFailed, wantReason: "model_error", wantPatch: true},
		{name: "invalid task", mutate: func(t *task.Task) { t.Instruction = "" }, wantStatus: task.StateRejected, wantReason: "instruction"},
		{name: "repo not found", wsErr: &InputError{Err: errors.New("not a git repository: /src/r")},
			wantStatus: task.StateRejected, wantReason: "not a git repository"},
		{name: "clone network error", wsErr: &TransientError{Err: errors.New("connection refused")},
			wantStatus: task.StateFailed, wantRetry: true, wantReason: "clone"},
		{name: "engine down", sbErr: &sandbox.Error{Kind: sandbox.ErrUnavailable, Op: "start", Err: errBoom},
			wantStatus: task.StateFailed, wantRetry: true, wantReason: "unavailable"},
		{name: "image missing", sbErr: &sandbox.Error{Kind: sandbox.ErrImageMissing, Op: "start", Err: errors.New("run `wrench image build`")},
			wantStatus: task.StateFailed, wantReason: "wrench image build"},
		{name: "bad limits", sbErr: &sandbox.Error{Kind: sandbox.ErrInvalid, Op: "start", Err: errBoom},
			wantStatus: task.StateRejected},
		{name: "unknown model scheme", modelErr: &InputError{Err: errors.New(`unknown model scheme "foo"`)},
			wantStatus: task.StateRejected, wantReason: "model scheme", wantPatch: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wss := &fakeWorkspaces{err: c.wsErr}
			prov := &fakeProvider{err: c.sbErr}
			ag := &fakeAgent{reason: agent.StopFinished}
			if c.agent != nil {
				ag = c.agent(prov)
			}
			w, err := New(Config{Workspaces: wss, Sandboxes: prov, Models: fakeModels(c.modelErr), Agent: ag})
			if err != nil {
				t.Fatal(err)
			}
			tk := testTask()
			if c.mutate != nil {
				c.mutate(&tk)
			}
			var events []task.Event
			rep := w.Run(context.Background(), tk, 1, func(ev task.Event) { events = append(events, ev) })
			res := rep.Result
			if res.Status != c.wantStatus || rep.Retry != c.wantRetry || !strings.Contains(res.Reason, c.wantReason) {
				t.Fatalf("status %s retry %v reason %q; want %s retry %v reason containing %q",
					res.Status, rep.Retry, res.Reason, c.wantStatus, c.wantRetry, c.wantReason)
			}
			if (res.Patch != "") != c.wantPatch {
				t.Errorf("patch %q, want patch=%v", res.Patch, c.wantPatch)
			}
			if !wss.allClosed() || !prov.allClosed() {
				t.Error("a workspace or sandbox was left open")
			}
			if len(events) == 0 || events[len(events)-1].Kind != task.EventResult {
				t.Errorf("last event is not the result: %+v", events)
			}
			if _, ok := rep.Artifacts["log.txt"]; !ok {
				t.Error("no log artifact")
			}
			if res.TaskID != tk.ID || res.Attempt != 1 || res.FinishedAt.IsZero() {
				t.Errorf("result header: %+v", res)
			}
		})
	}
}

func TestRunBaselineAndVerify(t *testing.T) {
	prov := &fakeProvider{}
	w, _ := New(Config{Workspaces: &fakeWorkspaces{}, Sandboxes: prov, Models: fakeModels(nil),
		Agent: &fakeAgent{reason: agent.StopFinished, fix: prov}})
	res := w.Run(context.Background(), testTask(), 1, nil).Result
	if res.TestsBefore == nil || res.TestsBefore.Passed || res.TestsAfter == nil || !res.TestsAfter.Passed {
		t.Fatalf("tests before %+v after %+v; want fail then pass", res.TestsBefore, res.TestsAfter)
	}
	if res.BaseCommit == "" {
		t.Error("no base commit")
	}
}

func TestRunCancelAndTimeout(t *testing.T) {
	t.Run("cancel", func(t *testing.T) {
		wss, prov := &fakeWorkspaces{}, &fakeProvider{}
		w, _ := New(Config{Workspaces: wss, Sandboxes: prov, Models: fakeModels(nil), Agent: &fakeAgent{block: true}})
		ctx, cancel := context.WithCancel(context.Background())
		started := make(chan struct{})
		var once bool
		done := make(chan task.Report)
		go func() {
			done <- w.Run(ctx, testTask(), 1, func(ev task.Event) {
				if ev.Kind == task.EventPhase && ev.Phase == "agent" && !once {
					once = true
					close(started)
				}
			})
		}()
		<-started
		cancel()
		rep := <-done
		if rep.Result.Status != task.StateCancelled || rep.Retry {
			t.Fatalf("status %s retry %v, want cancelled", rep.Result.Status, rep.Retry)
		}
		if !wss.allClosed() || !prov.allClosed() {
			t.Error("left open after cancel")
		}
	})
	t.Run("timeout", func(t *testing.T) {
		prov := &fakeProvider{}
		w, _ := New(Config{Workspaces: &fakeWorkspaces{}, Sandboxes: prov, Models: fakeModels(nil), Agent: &fakeAgent{block: true}})
		tk := testTask()
		tk.Limits.Timeout = task.Duration(50 * time.Millisecond)
		rep := w.Run(context.Background(), tk, 1, nil)
		if rep.Result.Status != task.StateTimedOut || !prov.allClosed() {
			t.Fatalf("status %s, closed %v; want timed_out and closed", rep.Result.Status, prov.allClosed())
		}
	})
}

func TestSandboxSpecOverrides(t *testing.T) {
	prov := &fakeProvider{}
	w, _ := New(Config{Workspaces: &fakeWorkspaces{}, Sandboxes: prov, Models: fakeModels(nil),
		Agent: &fakeAgent{reason: agent.StopFinished}, DefaultImage: "img:default",
		Sandbox: SandboxDefaults{MemoryMB: 1024, Env: map[string]string{"A": "1"}}})
	tk := testTask()
	tk.Image, tk.Sandbox = "img:custom", task.SandboxOptions{MemoryMB: 512, Network: "bridge"}
	w.Run(context.Background(), tk, 1, nil)
	s := prov.spec
	if s.Image != "img:custom" || s.MemoryBytes != 512<<20 || s.Network != "bridge" || s.Pids != 512 ||
		s.TaskID != "t1" || s.WorkspaceDir != "/tmp/ws-t1" || s.Env["A"] != "1" {
		t.Fatalf("spec %+v", s)
	}
}

func TestRunPassesTaskOptionsToTheAgent(t *testing.T) {
	ag := &fakeAgent{reason: agent.StopFinished}
	approve := func(context.Context, agent.ApprovalRequest) (bool, error) { return true, nil }
	w, _ := New(Config{Workspaces: &fakeWorkspaces{}, Sandboxes: &fakeProvider{}, Models: fakeModels(nil), Agent: ag,
		Approval: agent.ApproveConfirm, Approve: approve})
	tk := testTask()
	tk.Mode, tk.PlanFirst, tk.AllowedTools, tk.Protocol = "plan", true, []string{"view"}, "text"
	w.Run(context.Background(), tk, 1, nil)
	r := ag.last
	if r == nil || r.Mode != agent.ModePlan || !r.PlanFirst || len(r.AllowedTools) != 1 || r.Protocol != "text" ||
		r.Approval != agent.ApproveConfirm || r.Approve == nil || r.Baseline == nil || r.Limits.HardTurnCap != task.MaxTurnsHardCap {
		t.Fatalf("agent run %+v", r)
	}
}
