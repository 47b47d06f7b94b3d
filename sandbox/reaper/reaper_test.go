package reaper

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
)

const (
	self      = 100
	deadPID   = 200
	livePID   = 300
	reusePID  = 400
	zombiePID = 500
	// selfStart and liveStart are the start ticks of this process and of
	// livePID; reusePID started at reuseStart.
	selfStart  = 1000
	liveStart  = 2000
	reuseStart = 9000
)

var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

type fakeDocker struct {
	mu        sync.Mutex
	list      []sandbox.Container
	listErr   error
	removeErr map[string]error
	removed   []string
	filters   []string
}

func (f *fakeDocker) Containers(_ context.Context, labels ...string) ([]sandbox.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.filters = labels
	return f.list, f.listErr
}

func (f *fakeDocker) RemoveContainer(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.removeErr[id]; err != nil {
		return err
	}
	f.removed = append(f.removed, id)
	return nil
}

type fakeWorkspaces struct {
	list    []sandbox.WorkspaceInfo
	removed []string
}

func (f *fakeWorkspaces) List() ([]sandbox.WorkspaceInfo, error) { return f.list, nil }

func (f *fakeWorkspaces) Remove(w sandbox.WorkspaceInfo) error {
	f.removed = append(f.removed, w.Dir)
	return nil
}

func fakeProc(pid int) Process {
	switch pid {
	case livePID:
		return Process{Running: true, Start: liveStart, Started: now.Add(-48 * time.Hour)}
	case reusePID:
		return Process{Running: true, Start: reuseStart, Started: now.Add(-time.Minute)} // started after the resources below
	case zombiePID:
		return Process{Running: true, Zombie: true, Start: liveStart, Started: now.Add(-48 * time.Hour)}
	case self:
		return Process{Running: true, Start: selfStart, Started: now.Add(-48 * time.Hour)}
	}
	return Process{}
}

func labels(task, host string, pid int, age time.Duration) map[string]string {
	return map[string]string{
		sandbox.LabelManaged:    "true",
		sandbox.LabelDeployment: "prod",
		sandbox.LabelTask:       task,
		sandbox.LabelOwnerHost:  host,
		sandbox.LabelOwnerPID:   strconv.Itoa(pid),
		sandbox.LabelCreated:    now.Add(-age).Format(time.RFC3339),
	}
}

func TestOrphanRules(t *testing.T) {
	tests := []struct {
		name    string
		task    string
		host    string
		pid     int
		start   uint64 // the owner-start label (0: none)
		age     time.Duration
		alive   func(string) bool
		final   []string
		removed bool
		cause   string
	}{
		{name: "zombie owner", host: "here", pid: zombiePID, start: liveStart, age: time.Hour, removed: true, cause: CauseOwnerZombie},
		{name: "owner pid reused, told by its start", host: "here", pid: livePID, start: liveStart - 1, age: time.Hour, removed: true, cause: CausePIDReused},
		{name: "live owner, same start", host: "here", pid: livePID, start: liveStart, age: time.Hour},
		{name: "this pid, an earlier process's", task: "t-old", host: "here", pid: self, start: selfStart - 7, age: time.Second, alive: aliveSet(), removed: true, cause: CausePIDReused},
		{name: "this process's, its start", task: "t-new", host: "here", pid: self, start: selfStart, age: time.Second, alive: aliveSet()},
		{name: "final task, owner alive", task: "t-final", host: "here", pid: livePID, start: liveStart, age: time.Second, final: []string{"t-final"}, removed: true, cause: CauseTaskFinal},
		{name: "final task on another host", task: "t-final", host: "there", pid: livePID, age: time.Second, final: []string{"t-final"}, removed: true, cause: CauseTaskFinal},
		{name: "task not final, owner alive", task: "t-running", host: "here", pid: livePID, start: liveStart, age: time.Second, final: []string{"t-final"}},
		{name: "dead owner on this host", host: "here", pid: deadPID, age: time.Hour, removed: true, cause: CauseOwnerGone},
		{name: "dead owner, fresh container", host: "here", pid: deadPID, age: 0, removed: true},
		{name: "live owner on this host", host: "here", pid: livePID, age: time.Hour},
		{name: "owner pid reused by a later process", host: "here", pid: reusePID, age: time.Hour, removed: true},
		{name: "owner on another host", host: "there", pid: deadPID, age: time.Hour},
		{name: "another host, past MaxAge", host: "there", pid: livePID, age: 25 * time.Hour, removed: true},
		{name: "live owner, past MaxAge", host: "here", pid: livePID, age: 25 * time.Hour, removed: true},
		{name: "task alive though owner dead", task: "t-alive", host: "here", pid: deadPID, age: time.Hour, alive: aliveSet("t-alive")},
		{name: "task alive past MaxAge", task: "t-alive", host: "there", pid: livePID, age: 48 * time.Hour, alive: aliveSet("t-alive")},
		{name: "this process, task over, past grace", task: "t-done", host: "here", pid: self, age: 2 * time.Minute, alive: aliveSet(), removed: true},
		{name: "this process, task over, within grace", task: "t-done", host: "here", pid: self, age: 10 * time.Second, alive: aliveSet()},
		{name: "this process, liveness unknown", task: "t-done", host: "here", pid: self, age: time.Hour},
		{name: "no owner pid", host: "here", pid: 0, age: time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task := tt.task
			if task == "" {
				task = "t-1"
			}
			l := labels(task, tt.host, tt.pid, tt.age)
			if tt.start != 0 {
				l[sandbox.LabelOwnerStart] = strconv.FormatUint(tt.start, 10)
			}
			d := &fakeDocker{list: []sandbox.Container{{ID: "c1", Labels: l}}}
			ws := &fakeWorkspaces{list: []sandbox.WorkspaceInfo{{
				Dir: "/ws/1", TaskID: task, Deployment: "prod", Created: now.Add(-tt.age), OwnerPID: tt.pid, OwnerHost: tt.host, OwnerStart: tt.start,
			}}}
			var observed []Removed
			cfg := Config{Docker: d, Workspaces: ws, Alive: tt.alive, Observe: func(r Removed) { observed = append(observed, r) }}
			if tt.final != nil {
				cfg.Final = func(_ context.Context, id string) (bool, error) { return slices.Contains(tt.final, id), nil }
			}
			r := newTestReaper(t, cfg)
			rep, err := r.Sweep(context.Background())
			if err != nil {
				t.Fatalf("Sweep: %v", err)
			}
			if got := len(d.removed) == 1; got != tt.removed {
				t.Errorf("container removed = %v, want %v", got, tt.removed)
			}
			if got := len(ws.removed) == 1; got != tt.removed {
				t.Errorf("workspace removed = %v, want %v", got, tt.removed)
			}
			wantKept := 2
			if tt.removed {
				wantKept = 0
				if len(rep.Containers) != 1 || rep.Containers[0].Reason == "" || rep.Containers[0].TaskID != task {
					t.Errorf("report containers = %+v", rep.Containers)
				}
				if tt.cause != "" && (rep.Containers[0].Cause != tt.cause || rep.Workspaces[0].Cause != tt.cause) {
					t.Errorf("causes %q and %q, want %q", rep.Containers[0].Cause, rep.Workspaces[0].Cause, tt.cause)
				}
				if len(observed) != 2 || observed[0].Kind != KindContainer || observed[1].Kind != KindWorkspace {
					t.Errorf("observed %+v, want the container and the workspace", observed)
				}
			}
			if rep.Kept != wantKept {
				t.Errorf("Kept = %d, want %d", rep.Kept, wantKept)
			}
		})
	}
}

func TestSweepFiltersByDeployment(t *testing.T) {
	d := &fakeDocker{}
	r := newTestReaper(t, Config{Docker: d})
	if _, err := r.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	slices.Sort(d.filters)
	want := []string{sandbox.LabelDeployment + "=prod", sandbox.LabelManaged + "=true"}
	if !slices.Equal(d.filters, want) {
		t.Errorf("label filters = %v, want %v", d.filters, want)
	}
}

func TestUnlabelledWorkspaces(t *testing.T) {
	ws := &fakeWorkspaces{list: []sandbox.WorkspaceInfo{
		{Dir: "/ws/old-stray", Created: now.Add(-time.Hour)},
		{Dir: "/ws/new-stray", Created: now.Add(-time.Second)},
		{Dir: "/ws/other", Deployment: "staging", TaskID: "x", OwnerHost: "here", OwnerPID: deadPID, Created: now.Add(-time.Hour)},
	}}
	r := newTestReaper(t, Config{Workspaces: ws})
	rep, err := r.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ws.removed, []string{"/ws/old-stray"}) || rep.Kept != 2 {
		t.Errorf("removed %v, kept %d; want only the old unlabelled directory", ws.removed, rep.Kept)
	}
}

func TestDryRun(t *testing.T) {
	d := &fakeDocker{list: []sandbox.Container{{ID: "c1", Labels: labels("t", "here", deadPID, time.Hour)}}}
	ws := &fakeWorkspaces{list: []sandbox.WorkspaceInfo{{Dir: "/ws/1", TaskID: "t", Deployment: "prod", OwnerHost: "here", OwnerPID: deadPID, Created: now}}}
	r := newTestReaper(t, Config{Docker: d, Workspaces: ws, DryRun: true})
	rep, err := r.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(d.removed)+len(ws.removed) != 0 {
		t.Errorf("dry run removed %v %v", d.removed, ws.removed)
	}
	if len(rep.Containers) != 1 || len(rep.Workspaces) != 1 {
		t.Errorf("dry run report = %+v, want one of each", rep)
	}
}

func TestSweepErrors(t *testing.T) {
	t.Run("remove failure does not stop the sweep", func(t *testing.T) {
		d := &fakeDocker{
			list: []sandbox.Container{
				{ID: "bad", Labels: labels("a", "here", deadPID, time.Hour)},
				{ID: "good", Labels: labels("b", "here", deadPID, time.Hour)},
			},
			removeErr: map[string]error{"bad": errors.New("device busy")},
		}
		ws := &fakeWorkspaces{list: []sandbox.WorkspaceInfo{{Dir: "/ws/1", TaskID: "a", Deployment: "prod", OwnerHost: "here", OwnerPID: deadPID, Created: now}}}
		rep, err := newTestReaper(t, Config{Docker: d, Workspaces: ws}).Sweep(context.Background())
		if err == nil {
			t.Fatal("Sweep returned no error")
		}
		if !slices.Equal(d.removed, []string{"good"}) || len(ws.removed) != 1 || len(rep.Containers) != 1 {
			t.Errorf("removed %v %v, report %+v", d.removed, ws.removed, rep)
		}
	})
	t.Run("engine down is unavailable", func(t *testing.T) {
		d := &fakeDocker{listErr: &sandbox.Error{Kind: sandbox.ErrUnavailable, Op: "list containers", Err: errors.New("connection refused")}}
		_, err := newTestReaper(t, Config{Docker: d}).Sweep(context.Background())
		if sandbox.KindOf(err) != sandbox.ErrUnavailable {
			t.Errorf("error %v: kind %q, want %q", err, sandbox.KindOf(err), sandbox.ErrUnavailable)
		}
	})
}

func TestNewRequiresDeployment(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New accepted an empty Deployment")
	}
}

func TestRunSweepsUntilCancelled(t *testing.T) {
	d := &fakeDocker{list: []sandbox.Container{{ID: "c1", Labels: labels("t", "here", deadPID, time.Hour)}}}
	r := newTestReaper(t, Config{Docker: d, Interval: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	for len(removedSnapshot(d)) < 3 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
}

func removedSnapshot(d *fakeDocker) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.removed)
}

func aliveSet(tasks ...string) func(string) bool {
	return func(id string) bool { return slices.Contains(tasks, id) }
}

func newTestReaper(t *testing.T, cfg Config) *Reaper {
	t.Helper()
	cfg.Deployment = "prod"
	cfg.Host = "here"
	cfg.PID = self
	cfg.Start = selfStart
	cfg.Now = func() time.Time { return now }
	cfg.Proc = fakeProc
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// RemoveTask removes every resource of the task, whoever owns it (a live
// process included), and nothing of other tasks.
func TestRemoveTask(t *testing.T) {
	d := &fakeDocker{list: []sandbox.Container{{ID: "c1", Labels: labels("t-again", "here", livePID, time.Minute)}}}
	ws := &fakeWorkspaces{list: []sandbox.WorkspaceInfo{
		{Dir: "/ws/1", TaskID: "t-again", Deployment: "prod", OwnerHost: "here", OwnerPID: livePID, Created: now},
		{Dir: "/ws/2", TaskID: "t-other", Deployment: "prod", OwnerHost: "here", OwnerPID: deadPID, Created: now},
		{Dir: "/ws/3", TaskID: "t-again", Deployment: "staging", OwnerHost: "here", OwnerPID: deadPID, Created: now},
	}}
	rep, err := newTestReaper(t, Config{Docker: d, Workspaces: ws}).RemoveTask(context.Background(), "t-again")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.removed, []string{"c1"}) || !slices.Equal(ws.removed, []string{"/ws/1"}) {
		t.Errorf("removed %v %v, want c1 and /ws/1", d.removed, ws.removed)
	}
	if !slices.Contains(d.filters, sandbox.LabelTask+"=t-again") {
		t.Errorf("container filters %v do not name the task", d.filters)
	}
	if len(rep.Containers) != 1 || rep.Containers[0].Cause != CauseRedelivered {
		t.Errorf("report = %+v", rep)
	}
}
