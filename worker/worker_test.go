package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/environment"
	"github.com/wrenchworks/wrench/policy"
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
		files      map[string]string
		policy     string
		agent      func(p *fakeEnvironments) *fakeAgent
		wantStatus task.State
		wantRetry  bool
		wantReason string
		wantPatch  bool
	}{
		{name: "fixed and tests pass", agent: func(p *fakeEnvironments) *fakeAgent { return &fakeAgent{reason: agent.StopFinished, fix: p} },
			wantStatus: task.StateResolved, wantPatch: true},
		{name: "finished but tests fail", agent: func(*fakeEnvironments) *fakeAgent { return &fakeAgent{reason: agent.StopFinished} },
			wantStatus: task.StateUnresolved, wantReason: "tests fail", wantPatch: true},
		{name: "no test command, finished", mutate: func(t *task.Task) { t.TestCommand = "" },
			agent:      func(*fakeEnvironments) *fakeAgent { return &fakeAgent{reason: agent.StopFinished} },
			wantStatus: task.StateResolved, wantPatch: true},
		{name: "no test command, max turns", mutate: func(t *task.Task) { t.TestCommand = "" },
			agent:      func(*fakeEnvironments) *fakeAgent { return &fakeAgent{reason: agent.StopMaxTurns} },
			wantStatus: task.StateUnresolved, wantReason: "max_turns", wantPatch: true},
		{name: "loop detected keeps partial work", agent: func(*fakeEnvironments) *fakeAgent { return &fakeAgent{reason: agent.StopLoopDetected} },
			wantStatus: task.StateUnresolved, wantReason: "loop_detected", wantPatch: true},
		{name: "model error", agent: func(*fakeEnvironments) *fakeAgent {
			return &fakeAgent{reason: agent.StopModelError, err: &agent.ModelError{Kind: agent.ModelServer, Err: errBoom}}
		}, wantStatus: task.StateFailed, wantReason: "model_error", wantPatch: true},
		{name: "invalid task", mutate: func(t *task.Task) { t.Instruction = "" }, wantStatus: task.StateRejected, wantReason: "instruction"},
		{name: "unknown tool in the allowlist", mutate: func(t *task.Task) { t.AllowedTools = []string{"bash", "bsh"} },
			wantStatus: task.StateRejected, wantReason: `allowed_tools[1]: "bsh" is not a tool`},
		{name: "the agent refuses the run", agent: func(*fakeEnvironments) *fakeAgent {
			return &fakeAgent{runErr: fmt.Errorf("%w: render prompt system: map has no entry for key \"Nope\"", agent.ErrInvalidRun)}
		}, wantStatus: task.StateRejected, wantReason: "render prompt system", wantPatch: true},
		{name: "plan mode: a finished plan, tests not rerun", mutate: func(t *task.Task) { t.Mode = task.ModePlan },
			agent:      func(*fakeEnvironments) *fakeAgent { return &fakeAgent{reason: agent.StopFinished} },
			wantStatus: task.StateResolved, wantReason: "plan mode: the plan is the summary", wantPatch: true},
		{name: "plan mode: out of turns", mutate: func(t *task.Task) { t.Mode = task.ModePlan },
			agent:      func(*fakeEnvironments) *fakeAgent { return &fakeAgent{reason: agent.StopMaxTurns} },
			wantStatus: task.StateUnresolved, wantReason: "max_turns; plan mode: no plan was finished", wantPatch: true},
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
		{name: "setup failed", sbErr: &environment.SetupError{Run: &task.SetupRun{Snapshot: task.SnapshotMiss, ExitCode: 2, Output: "E: no such package"}},
			wantStatus: task.StateFailed, wantReason: "setup_failed"},
		{name: "malformed .wrench.yaml", files: map[string]string{".wrench.yaml": "test: go test\nlimits:\n  max_turn: 3\n"},
			wantStatus: task.StateRejected, wantReason: ".wrench.yaml:3: limits.max_turn"},
		{name: "the policy refuses the repository", policy: "repositories:\n  - {match: \"/src/*\", allow: false, reason: not here}\n",
			wantStatus: task.StateRejected, wantReason: "not allowed by the server policy: not here"},
		{name: ".wrench.yaml asks for a host the policy forbids", files: map[string]string{".wrench.yaml": "agent_egress: [evil.example]\n"},
			wantStatus: task.StateRejected, wantReason: "agent_egress[0]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wss := &fakeSources{err: c.wsErr, files: c.files}
			prov := &fakeEnvironments{err: c.sbErr}
			ag := &fakeAgent{reason: agent.StopFinished}
			if c.agent != nil {
				ag = c.agent(prov)
			}
			pol, err := policy.Parse([]byte(c.policy), policy.Options{Loopback: true})
			if err != nil {
				t.Fatal(err)
			}
			w, err := New(Config{Sources: wss, Environments: prov, Models: fakeModels(c.modelErr), Agent: ag, Policy: pol})
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
			// The patch is computed once per task, after the last test run.
			if n := prov.diffs(); c.wantPatch && n != 1 {
				t.Errorf("the workspace's diff was computed %d times, want once", n)
			}
			if !wss.allClosed() || !prov.allClosed() {
				t.Error("a source or sandbox was left open")
			}
			if wantFault := faultFor(c.wantStatus, c.wantReason); res.Fault != wantFault {
				t.Errorf("fault %q, want %q", res.Fault, wantFault)
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

// faultFor is the fault each case's outcome must carry.
func faultFor(s task.State, reason string) task.Fault {
	switch {
	case strings.Contains(reason, "setup_failed"):
		return task.FaultSetup
	case s == task.StateRejected:
		return task.FaultInput
	case s == task.StateFailed:
		return task.FaultInfra
	case s == task.StateUnresolved:
		return task.FaultModel
	}
	return task.FaultNone
}

func TestRunBaselineAndVerify(t *testing.T) {
	prov := &fakeEnvironments{}
	w, _ := New(Config{Sources: &fakeSources{}, Environments: prov, Models: fakeModels(nil),
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
		wss, prov := &fakeSources{}, &fakeEnvironments{}
		w, _ := New(Config{Sources: wss, Environments: prov, Models: fakeModels(nil), Agent: &fakeAgent{block: true}})
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
		prov := &fakeEnvironments{}
		w, _ := New(Config{Sources: &fakeSources{}, Environments: prov, Models: fakeModels(nil), Agent: &fakeAgent{block: true}})
		tk := testTask()
		tk.Limits.Timeout = task.Duration(50 * time.Millisecond)
		rep := w.Run(context.Background(), tk, 1, nil)
		if rep.Result.Status != task.StateTimedOut || !prov.allClosed() {
			t.Fatalf("status %s, closed %v; want timed_out and closed", rep.Result.Status, prov.allClosed())
		}
	})
}

func TestEffectiveConfiguration(t *testing.T) {
	prov := &fakeEnvironments{}
	pol, err := policy.Parse([]byte("defaults:\n  test: make check\n  limits: {memory_mb: 1024}\n"), policy.Options{Loopback: true})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{".wrench.yaml": "test: go test ./...\nenv: {A: \"1\"}\nlimits: {pids: 256}\ninstructions: [docs/agents.md]\n"}
	ag := &fakeAgent{reason: agent.StopFinished}
	w, _ := New(Config{Sources: &fakeSources{files: files}, Environments: prov, Models: fakeModels(nil),
		Agent: ag, Policy: pol})
	tk := testTask()
	tk.TestCommand, tk.Sandbox = "", task.SandboxOptions{MemoryMB: 512}
	res := w.Run(context.Background(), tk, 1, nil).Result
	req := prov.req
	s := req.Spec
	if req.Config.Test != "go test ./..." || req.Config.Env["A"] != "1" || s.MemoryBytes != 512<<20 || s.Pids != 256 || s.TaskID != "t1" {
		t.Fatalf("request %+v spec %+v", req.Config, s)
	}
	if res.TestsBefore == nil || res.TestsBefore.Command != "go test ./..." {
		t.Errorf("baseline %+v: want the repository's test command", res.TestsBefore)
	}
	if res.Setup == nil || res.Setup.Snapshot != task.SnapshotHit || res.Setup.Key != "k1" {
		t.Errorf("setup %+v", res.Setup)
	}
	if ag.last == nil || len(ag.last.ProjectInstructions) != 1 || ag.last.ProjectInstructions[0] != "docs/agents.md" {
		t.Errorf("the agent did not get the repository's instruction files: %+v", ag.last)
	}
}

func TestRunPassesTaskOptionsToTheAgent(t *testing.T) {
	ag := &fakeAgent{reason: agent.StopFinished}
	approve := func(context.Context, agent.ApprovalRequest) (bool, error) { return true, nil }
	w, _ := New(Config{Sources: &fakeSources{}, Environments: &fakeEnvironments{}, Models: fakeModels(nil), Agent: ag,
		Approval: agent.ApproveConfirm, Approve: approve})
	tk := testTask()
	tk.PlanFirst, tk.AllowedTools, tk.Protocol = true, []string{"view", "bash"}, "tools"
	w.Run(context.Background(), tk, 1, nil)
	r := ag.last
	if r == nil || !r.PlanFirst || len(r.AllowedTools) != 2 || r.Protocol != "tools" ||
		r.Approval != agent.ApproveConfirm || r.Approve == nil || r.Baseline == nil || r.Limits.HardTurnCap != task.MaxTurnsHardCap {
		t.Fatalf("agent run %+v", r)
	}
	tk.Mode, tk.PlanFirst, tk.AllowedTools, tk.Protocol = "plan", false, []string{"view"}, ""
	w.Run(context.Background(), tk, 1, nil)
	if r := ag.last; r.Mode != task.ModePlan || r.PlanFirst || len(r.AllowedTools) != 1 {
		t.Fatalf("plan mode run %+v", r)
	}
	tk.Mode, tk.AllowedTools, tk.Protocol = "", []string{"bash"}, "text"
	w.Run(context.Background(), tk, 1, nil)
	if r := ag.last; r.Protocol != "text" || len(r.AllowedTools) != 1 {
		t.Fatalf("text protocol run %+v", r)
	}
}

// TestAgentVerifiesWithTheTaskTestTimeout: the agent's own test runs are
// bounded like the worker's, by the effective test_timeout (here the
// repository's), not by a default of its own.
func TestAgentVerifiesWithTheTaskTestTimeout(t *testing.T) {
	for _, c := range []struct {
		files map[string]string
		want  time.Duration
	}{
		{nil, task.DefaultTestTimeout},
		{map[string]string{".wrench.yaml": "test_timeout: 3m\n"}, 3 * time.Minute},
	} {
		ag := &fakeAgent{reason: agent.StopFinished}
		w, _ := New(Config{Sources: &fakeSources{files: c.files}, Environments: &fakeEnvironments{}, Models: fakeModels(nil), Agent: ag,
			Policy: policy.Default(policy.Options{Loopback: true})})
		w.Run(context.Background(), testTask(), 1, nil)
		if ag.last == nil {
			t.Fatal("the agent did not run")
		}
		if got := ag.last.TestTimeout; got != c.want {
			t.Errorf("files %v: agent run's test timeout %v, want %v", c.files, got, c.want)
		}
	}
}

// TestPlanModeIsNotVerified: a plan-mode task changes nothing, so the test
// command is not run after it and the result never says the agent's
// changes broke the tests.
func TestPlanModeIsNotVerified(t *testing.T) {
	envs := &fakeEnvironments{}
	w, err := New(Config{Sources: &fakeSources{}, Environments: envs, Models: fakeModels(nil),
		Agent: &fakeAgent{reason: agent.StopFinished}})
	if err != nil {
		t.Fatal(err)
	}
	tk := testTask()
	tk.Mode = task.ModePlan
	res := w.Run(context.Background(), tk, 1, nil).Result
	if res.TestsAfter != nil || res.Status != task.StateResolved || strings.Contains(res.Reason, "tests fail") {
		t.Errorf("plan mode: status %s, reason %q, tests after %+v", res.Status, res.Reason, res.TestsAfter)
	}
}

// TestOnLimitReachesTheAgent: Config.OnLimit (wrench run's question on a
// terminal) is what the agent asks at a limit.
func TestOnLimitReachesTheAgent(t *testing.T) {
	ag := &fakeAgent{reason: agent.StopFinished}
	asked := 0
	w, _ := New(Config{Sources: &fakeSources{}, Environments: &fakeEnvironments{}, Models: fakeModels(nil), Agent: ag,
		OnLimit: func(agent.StopReason) bool { asked++; return true }})
	w.Run(context.Background(), testTask(), 1, nil)
	if ag.last == nil || ag.last.OnLimit == nil || !ag.last.OnLimit(agent.StopMaxTurns) || asked != 1 {
		t.Fatalf("OnLimit not passed to the agent (asked %d)", asked)
	}
}

// TestRedeliveryReclaimsEarlierAttempts: an attempt after the first removes
// what earlier attempts left before it clones; a first attempt does not.
func TestRedeliveryReclaimsEarlierAttempts(t *testing.T) {
	var calls []string
	src := &fakeSources{}
	w, _ := New(Config{Sources: src, Environments: &fakeEnvironments{}, Models: fakeModels(nil), Agent: &fakeAgent{reason: agent.StopFinished},
		Reclaim: func(_ context.Context, id string) (int, error) {
			if len(src.opened) != 0 {
				t.Error("reclaimed after the clone")
			}
			calls = append(calls, id)
			return 2, nil
		}})
	tk := testTask()
	w.Run(context.Background(), tk, 1, nil)
	if len(calls) != 0 {
		t.Fatalf("first attempt reclaimed: %v", calls)
	}
	src.opened = nil
	var events []task.Event
	w.Run(context.Background(), tk, 2, func(ev task.Event) { events = append(events, ev) })
	if len(calls) != 1 || calls[0] != tk.ID {
		t.Fatalf("reclaims = %v, want one of %s", calls, tk.ID)
	}
	found := false
	for _, ev := range events {
		found = found || strings.Contains(ev.Text, "removed 2 containers and workspaces of earlier attempts")
	}
	if !found {
		t.Error("no event says what was removed")
	}
}

// A save point is used only by a run from the same base commit, in the
// format this worker writes.
func TestDecodeResume(t *testing.T) {
	good := `{"version":1,"base_commit":"abc","patch":"p","turn":5,"messages":[{"role":"system","content":"s"}]}`
	st, err := decodeResume([]byte(good), "abc")
	if err != nil || st.Turn != 5 || st.Patch != "p" || len(st.Messages) != 1 {
		t.Fatalf("decode = %+v, %v", st, err)
	}
	for _, c := range []struct{ data, base, want string }{
		{good, "def", "now starts from def"},
		{`{"version":2,"base_commit":"abc"}`, "abc", "format 2"},
		{`{`, "abc", "save point"},
	} {
		if _, err := decodeResume([]byte(c.data), c.base); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("decode %s from %s: %v, want %q", c.data, c.base, err, c.want)
		}
	}
}

// TestPatchThatCannotBeTakenIsNotResolved: nothing says resolved without
// its patch. A diff that fails (the workspace's disk is full) turns a
// resolved attempt into a retried infrastructure failure; a patch over
// the size cap fails it for good; a partial patch (files too large left
// out) keeps it; an unresolved attempt stays unresolved.
func TestPatchThatCannotBeTakenIsNotResolved(t *testing.T) {
	enospc := fmt.Errorf("diff: read big.bin: write /data/workspaces/t1/state/objects/ab: %w", syscall.ENOSPC)
	partial := &workspacePartial{}
	overCap := &sandbox.Error{Kind: sandbox.ErrLimit, Op: "diff", Err: errors.New("the patch is 20000000 bytes, over the limit of 16777216")}
	cases := []struct {
		name       string
		diff       string
		err        error
		fixed      bool
		wantStatus task.State
		wantFault  task.Fault
		wantRetry  bool
		wantReason string
		wantPatch  bool
	}{
		{"disk full while taking the patch", "", enospc, true, task.StateFailed, task.FaultInfra, true, "the patch could not be taken: diff: read big.bin", false},
		{"patch over the cap", "", overCap, true, task.StateFailed, task.FaultModel, false, "the patch could not be kept: sandbox diff: limit: the patch is 20000000 bytes", false},
		{"partial patch", "diff --git a/x b/x\n", partial, true, task.StateResolved, task.FaultNone, false, "diff: the patch leaves out", true},
		{"unresolved, disk full", "", enospc, false, task.StateUnresolved, task.FaultModel, false, "tests fail", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prov := &fakeEnvironments{diff: c.diff, diffErr: c.err}
			ag := &fakeAgent{reason: agent.StopFinished}
			if c.fixed {
				ag.fix = prov
			}
			w, err := New(Config{Sources: &fakeSources{}, Environments: prov, Models: fakeModels(nil), Agent: ag})
			if err != nil {
				t.Fatal(err)
			}
			rep := w.Run(context.Background(), testTask(), 1, nil)
			res := rep.Result
			if res.Status != c.wantStatus || res.Fault != c.wantFault || rep.Retry != c.wantRetry || !strings.Contains(res.Reason, c.wantReason) {
				t.Fatalf("status %s fault %q retry %v reason %q; want %s %q retry %v reason containing %q",
					res.Status, res.Fault, rep.Retry, res.Reason, c.wantStatus, c.wantFault, c.wantRetry, c.wantReason)
			}
			if (res.Patch != "") != c.wantPatch {
				t.Errorf("patch %q, want patch=%v", res.Patch, c.wantPatch)
			}
			if _, ok := rep.Artifacts["patch.diff"]; ok != c.wantPatch {
				t.Errorf("patch artifact present=%v, want %v", ok, c.wantPatch)
			}
		})
	}
}

// workspacePartial is a Diff error for a patch that left files out.
type workspacePartial struct{}

func (*workspacePartial) Error() string {
	return "the patch leaves out 1 file(s) over 32 MB, changed but too large to include: big.bin"
}
func (*workspacePartial) Is(target error) bool { return target == sandbox.ErrPartialPatch }

// A sandbox that failed on one of its limits (the task's commands filled
// its disk or memory) fails the task as its own doing, not retried: each
// redelivery would hit the same limit until the task was dead-lettered. A
// sandbox that failed otherwise is still the infrastructure's, retried.
func TestSandboxLimitIsNotRetried(t *testing.T) {
	disk := &sandbox.Error{Kind: sandbox.ErrLimit, Op: "call", Err: errors.New("the sandbox's disk use exceeded 2000 MB (used 2049 MB)")}
	gone := &sandbox.Error{Kind: sandbox.ErrGone, Op: "exec", Err: errors.New("container removed")}
	for _, c := range []struct {
		name      string
		err       error
		wantFault task.Fault
		wantRetry bool
	}{
		{"disk limit", fmt.Errorf("exec: %w", errors.Join(agent.ErrEnvFailed, disk)), task.FaultModel, false},
		{"container gone", fmt.Errorf("exec: %w", errors.Join(agent.ErrEnvFailed, gone)), task.FaultInfra, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ag := &fakeAgent{reason: agent.StopEnvError, err: c.err}
			w, err := New(Config{Sources: &fakeSources{}, Environments: &fakeEnvironments{}, Models: fakeModels(nil), Agent: ag})
			if err != nil {
				t.Fatal(err)
			}
			rep := w.Run(context.Background(), testTask(), 1, nil)
			if res := rep.Result; res.Status != task.StateFailed || res.Fault != c.wantFault || rep.Retry != c.wantRetry {
				t.Fatalf("status %s fault %q retry %v (%s); want failed, fault %q, retry %v", res.Status, res.Fault, rep.Retry, res.Reason, c.wantFault, c.wantRetry)
			}
		})
	}
}
