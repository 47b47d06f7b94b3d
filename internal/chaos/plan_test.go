package chaos

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// TestPlanIsTheSeeds: a seed decides the plan (so SEED reproduces a run),
// another seed another one; every kind is aimed perKind times, each at a
// task of the shape it needs, one fault per task, none at the first or
// last 5%.
func TestPlanIsTheSeeds(t *testing.T) {
	a, b := newPlan(7, 500, 12, 4, 0.1), newPlan(7, 500, 12, 4, 0.1)
	if !reflect.DeepEqual(a.shapes, b.shapes) || !reflect.DeepEqual(a.aimed, b.aimed) || !reflect.DeepEqual(a.natsAt, b.natsAt) ||
		a.pauseDraw() != b.pauseDraw() {
		t.Fatal("the same seed drew two plans")
	}
	if c := newPlan(8, 500, 12, 4, 0.1); reflect.DeepEqual(a.aimed, c.aimed) {
		t.Error("seeds 7 and 8 drew the same plan")
	}
	count := map[Kind]int{KillNATS: len(a.natsAt)}
	for i, k := range a.aimed {
		count[k]++
		if a.shapes[i] != shapeFor[k] {
			t.Errorf("task %d: %s aimed at a %s task", i, k, a.shapes[i])
		}
		if k == KillPublish != a.github[i] {
			t.Errorf("task %d: %s aimed at a task from GitHub: %v", i, k, a.github[i])
		}
		if i < 25 || i >= 475 {
			t.Errorf("task %d: aimed outside the middle of the run", i)
		}
	}
	for _, k := range Kinds {
		if count[k] != 12 {
			t.Errorf("%s aimed %d times, want 12", k, count[k])
		}
	}
}

// pauseDraw is the plan's next draw, to compare two generators.
func (p *plan) pauseDraw() int64 { return p.rng.Int64() }

// TestTriggers: each fault strikes at the event of its phase and no other.
func TestTriggers(t *testing.T) {
	phase := func(name, text string) task.Event { return task.Event{Kind: task.EventPhase, Phase: name, Text: text} }
	state := func(s task.State) task.Event { return task.Event{Kind: task.EventState, State: s} }
	result := task.Event{Kind: task.EventToolResult}
	for _, c := range []struct {
		kind    Kind
		ev      task.Event
		results int
		want    bool
	}{
		{KillClone, phase("clone", " start"), 0, true},
		{KillClone, phase("clone", " end"), 0, false},
		{KillClone, phase("sandbox", " start"), 0, false},
		{KillAgent, result, 6, true},
		{KillAgent, result, 5, false},
		{StopWorker, result, 6, true},
		{RemoveBox, result, 3, true},
		{RemoveBox, result, 6, false},
		{KillVerify, state(task.StateVerifying), 0, true},
		{KillVerify, phase("verify", "finish"), 0, false}, // the agent's own verification
		{KillPublish, phase("verify", " end"), 0, true},
		{KillPublish, phase("verify", " start"), 0, false},
		{KillPublish, phase("verify", "finish"), 0, false},
		{Duplicate, state(task.StateRunning), 0, true},
		{Duplicate, state(task.StateQueued), 0, false},
	} {
		if got := trigger(c.kind, c.ev, c.results); got != c.want {
			t.Errorf("%s on %+v after %d results: %v, want %v", c.kind, c.ev, c.results, got, c.want)
		}
	}
}

// TestLateKillIsMissed: a kill whose phase had ended before the process
// died (its end is among the killed attempt's events) counts as missed;
// one whose attempt's events stop inside the phase counts as injected.
func TestLateKillIsMissed(t *testing.T) {
	evs := func(list ...task.Event) []task.Event {
		for i := range list {
			list[i].Seq = uint64(10 + i)
		}
		return list
	}
	running := task.Event{Kind: task.EventState, State: task.StateRunning}
	cloneStart := task.Event{Kind: task.EventPhase, Phase: "clone", Text: " start"}
	cloneEnd := task.Event{Kind: task.EventPhase, Phase: "clone", Text: " end"}
	res := task.Event{Kind: task.EventResult}
	verifyEnd := task.Event{Kind: task.EventPhase, Phase: "verify", Text: " end"}
	for _, c := range []struct {
		name   string
		kind   Kind
		events []task.Event
		late   bool
	}{
		{"killed inside the clone", KillClone, evs(running, cloneStart, running, cloneStart, cloneEnd), false},
		{"the clone had ended", KillClone, evs(running, cloneStart, cloneEnd, running, cloneStart, cloneEnd), true},
		{"killed before the result", KillPublish, evs(running, verifyEnd, running, res), false},
		{"the result was out", KillPublish, evs(running, verifyEnd, res), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &record{id: "t-1", aimed: c.kind, struckAt: 11}
			r := &runner{recs: []*record{rec}, faults: map[Kind]*faultCount{c.kind: {injected: 1}}}
			r.classifyLate(&ledger{events: map[string][]task.Event{"t-1": c.events}})
			if got := r.faults[c.kind].missed == 1; got != c.late {
				t.Errorf("counted as missed: %v, want %v (%+v)", got, c.late, r.faults[c.kind])
			}
		})
	}
}

// TestFinalOutcomes: a state record written final twice with the same
// outcome (publishing adds the pull request's URL) has one final
// outcome; written final by two attempts, two.
func TestFinalOutcomes(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	rev := func(s task.State, attempt int, finished time.Time, pr string) []byte {
		st := task.Status{TaskID: "t-1", State: s, Attempt: attempt}
		if s.Final() {
			st.Result = &task.Result{Status: s, Attempt: attempt, FinishedAt: finished, PullRequestURL: pr}
		}
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		name string
		revs [][]byte
		want int
	}{
		{"none final", [][]byte{rev(task.StateQueued, 0, at, ""), rev(task.StateRunning, 1, at, "")}, 0},
		{"once", [][]byte{rev(task.StateRunning, 1, at, ""), rev(task.StateResolved, 1, at, "")}, 1},
		{"the pull request added", [][]byte{rev(task.StateResolved, 1, at, ""), rev(task.StateResolved, 1, at, "https://x/pull/1")}, 1},
		{"two attempts", [][]byte{rev(task.StateResolved, 1, at, ""), rev(task.StateResolved, 2, at.Add(time.Second), "")}, 2},
		{"another state", [][]byte{rev(task.StateFailed, 1, at, ""), rev(task.StateResolved, 1, at, "")}, 2},
	} {
		if got := finalOutcomes(c.revs); got != c.want {
			t.Errorf("%s: %d final outcomes, want %d", c.name, got, c.want)
		}
	}
}

// TestStalled: a run is stalled when tasks are open and none became final
// for stallAfter, and not while none is open.
func TestStalled(t *testing.T) {
	r := &runner{open: map[string]*record{"t-1": {id: "t-1"}}, progress: time.Now()}
	if r.stalled() {
		t.Error("stalled right after progress")
	}
	r.progress = time.Now().Add(-stallAfter - time.Second)
	if !r.stalled() {
		t.Error("not stalled after stallAfter without progress")
	}
	r.open = map[string]*record{}
	if r.stalled() {
		t.Error("stalled with no task open")
	}
}
