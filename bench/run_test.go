package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// fakeQueue resolves a task when its instance id does not start with "x",
// remembers what was submitted, and counts the tasks in flight.
type fakeQueue struct {
	mu        sync.Mutex
	submitted map[string]int
	tasks     map[string]task.Task
	inFlight  int
	maxFlight int
	fail      string // instance whose Wait fails
}

func (q *fakeQueue) Submit(ctx context.Context, t task.Task) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.submitted == nil {
		q.submitted, q.tasks = map[string]int{}, map[string]task.Task{}
	}
	q.submitted[t.Grading.Instance]++
	q.tasks[t.ID] = t
	q.inFlight++
	q.maxFlight = max(q.maxFlight, q.inFlight)
	return nil
}

func (q *fakeQueue) Wait(ctx context.Context, id string) (task.Result, error) {
	time.Sleep(5 * time.Millisecond)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.inFlight--
	t := q.tasks[id]
	g := t.Grading
	if g.Instance == q.fail {
		return task.Result{}, errors.New("server gone")
	}
	ok := !strings.HasPrefix(g.Instance, "x")
	st := task.TestFailed
	if ok {
		st = task.TestPassed
	}
	return task.Result{TaskID: id, Status: task.StateResolved, Patch: "diff --git a/" + g.Instance + " b/" + g.Instance + "\n", Attempt: 1,
		Usage: task.Usage{CostUSD: 0.5, Turns: 2},
		Grade: &task.Grade{Run: g.Run, Instance: g.Instance, Resolved: ok, FailToPass: []task.TestOutcome{{Name: g.FailToPass[0], Status: st}}}}, nil
}

func instances(ids ...string) []Instance {
	var out []Instance
	for _, id := range ids {
		out = append(out, Instance{InstanceID: id, Repo: "r", RepoURL: "/nonexistent/r", BaseCommit: "abc123", Patch: "",
			TestPatch: "diff --git a/x_test.go b/x_test.go\n--- a/x_test.go\n+++ b/x_test.go\n", ProblemStatement: "fix " + id,
			FailToPass: TestList{"Test" + id}})
	}
	return out
}

func TestRunAndResume(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run1")
	ins := instances("a", "b", "xc", "d", "xe")
	q := &fakeQueue{}
	cfg := RunConfig{Dir: dir, Model: "some-model", Instances: ins, Concurrency: 2, Queue: q}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Run != "run1" || rep.Instances != 5 || rep.Resolved != 3 || rep.ModelFailures != 2 || rep.CostPerResolved == nil || *rep.CostPerResolved != 2.5/3 {
		t.Errorf("report %+v", rep)
	}
	if q.maxFlight > 2 {
		t.Errorf("%d in flight, concurrency 2", q.maxFlight)
	}
	for id, tk := range q.tasks {
		if tk.Instruction != "fix "+tk.Grading.Instance || tk.Source.Kind != "bench" || tk.Repo.Commit != "abc123" || tk.Model != "some-model" ||
			tk.Grading.Model != "some-model" || tk.Grading.Run != "run1" || id != TaskID("run1", "some-model", tk.Grading.Instance) {
			t.Errorf("task %s: %+v", id, tk)
		}
		if err := tk.Validate(); err != nil {
			t.Errorf("task %s does not validate: %v", id, err)
		}
	}
	preds, _ := os.ReadFile(filepath.Join(dir, "predictions.jsonl"))
	if lines := strings.Split(strings.TrimSpace(string(preds)), "\n"); len(lines) != 5 || !strings.Contains(lines[0], `"instance_id":"a"`) || !strings.Contains(lines[4], `"instance_id":"xe"`) {
		t.Errorf("predictions not one per instance, by id:\n%s", preds)
	}

	// A second run into the same directory is refused; resuming with
	// another model too.
	if _, err := Run(context.Background(), cfg); !errors.Is(err, ErrRunExists) {
		t.Errorf("second run: %v", err)
	}
	other := cfg
	other.Resume, other.Model = true, "gold"
	if _, err := Run(context.Background(), other); err == nil || !strings.Contains(err.Error(), "cannot resume") {
		t.Errorf("resume with another model: %v", err)
	}

	// Tear the last result as a kill would, and resume: only that
	// instance runs again, and the report is the same.
	res := filepath.Join(dir, "results.jsonl")
	data, _ := os.ReadFile(res)
	lines := strings.SplitAfter(string(data), "\n")
	torn := strings.Join(lines[:3], "") + lines[3][:20]
	if err := os.WriteFile(res, []byte(torn), 0o644); err != nil {
		t.Fatal(err)
	}
	q2 := &fakeQueue{}
	cfg.Queue, cfg.Resume = q2, true
	rep2, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(q2.submitted) != 2 {
		t.Errorf("resume ran %v, want the torn and the missing instance", q2.submitted)
	}
	if rep2.Resolved != rep.Resolved || rep2.Instances != 5 {
		t.Errorf("resumed report %+v", rep2)
	}
	rs, err := ReadResults(res)
	if err != nil || len(rs) != 5 {
		t.Errorf("results after resume: %d, %v", len(rs), err)
	}
}

func TestRunStopsOnQueueError(t *testing.T) {
	q := &fakeQueue{fail: "b"}
	_, err := Run(context.Background(), RunConfig{Dir: t.TempDir(), Model: "m", Instances: instances("a", "b", "c"), Queue: q})
	if err == nil || !strings.Contains(err.Error(), "instance b") {
		t.Errorf("err = %v", err)
	}
	if _, err := Run(context.Background(), RunConfig{Dir: t.TempDir(), Model: "m", Instances: []Instance{{InstanceID: "bad"}}, Queue: q}); err == nil {
		t.Error("an invalid instance ran")
	}
}

func TestTaskID(t *testing.T) {
	a := TaskID("run", "gold", "pallets__itsdangerous-7f4dcf83a07b")
	if a != TaskID("run", "gold", "pallets__itsdangerous-7f4dcf83a07b") || a == TaskID("run", "empty", "pallets__itsdangerous-7f4dcf83a07b") {
		t.Error("task ids are not a function of run, model and instance")
	}
	long := TaskID("run", "gold", strings.Repeat("very.long/instance id ", 5))
	tk := task.Task{ID: long, Repo: task.Repo{URL: "/r"}, Instruction: "x"}
	if len(long) > 64 || tk.Validate() != nil {
		t.Errorf("id %q (%d) is not a valid task id", long, len(long))
	}
}

// TestForEach: every index runs once with at most limit at a time, and a
// cancelled context starts no more.
func TestForEach(t *testing.T) {
	var mu sync.Mutex
	running, peak, seen := 0, 0, map[int]int{}
	ForEach(context.Background(), 20, 3, func(i int) {
		mu.Lock()
		running++
		peak = max(peak, running)
		seen[i]++
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		mu.Lock()
		running--
		mu.Unlock()
	})
	if len(seen) != 20 || peak > 3 || peak < 2 {
		t.Errorf("ran %d indexes, peak %d in flight; want 20 and at most 3", len(seen), peak)
	}
	for i, n := range seen {
		if n != 1 {
			t.Errorf("index %d ran %d times", i, n)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	var started atomic.Int32
	ForEach(ctx, 100, 1, func(int) {
		if started.Add(1) == 2 {
			cancel()
		}
	})
	if n := started.Load(); n != 2 {
		t.Errorf("%d calls started; want none after the cancel in the second", n)
	}
}
