package worker

import (
	"context"
	"errors"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

func TestRunWithPool(t *testing.T) {
	cases := []struct {
		name       string
		poolErr    error
		wsErr      error
		wantStatus task.State
		wantRetry  bool
	}{
		{name: "resolved", wantStatus: task.StateResolved},
		{name: "pool cannot start", poolErr: &sandbox.Error{Kind: sandbox.ErrUnavailable, Op: "start", Err: errBoom},
			wantStatus: task.StateFailed, wantRetry: true},
		{name: "clone into lease fails", wsErr: &InputError{Err: errors.New("not a git repository")},
			wantStatus: task.StateRejected},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prov := &fakeProvider{}
			pool := &fakePool{p: prov, err: c.poolErr}
			wss := &fakeWorkspaces{err: c.wsErr}
			w, err := New(Config{Workspaces: wss, Sandboxes: prov, Pool: pool, Models: fakeModels(nil),
				Agent: &fakeAgent{reason: agent.StopFinished, fix: prov}})
			if err != nil {
				t.Fatal(err)
			}
			rep := w.Run(context.Background(), testTask(), 1, nil)
			if rep.Result.Status != c.wantStatus || rep.Retry != c.wantRetry {
				t.Fatalf("status %s retry %v (%s); want %s retry %v", rep.Result.Status, rep.Retry, rep.Result.Reason, c.wantStatus, c.wantRetry)
			}
			if !pool.allReleased() || !prov.allClosed() || !wss.allClosed() {
				t.Error("a lease, sandbox or workspace was left behind")
			}
			if c.poolErr == nil && c.wsErr == nil {
				if len(wss.opened) != 1 || wss.opened[0].dir != "/pool/dir-1" {
					t.Errorf("workspace not cloned into the lease's directory: %+v", wss.opened)
				}
				if pool.acquired.WorkspaceDir != "" || pool.acquired.TaskID != "t1" {
					t.Errorf("acquired with %+v; want no WorkspaceDir and the task id", pool.acquired)
				}
			}
		})
	}
}

func TestPoolNeedsDirWorkspaces(t *testing.T) {
	prov := &fakeProvider{}
	_, err := New(Config{Workspaces: onlyOpen{&fakeWorkspaces{}}, Sandboxes: prov, Pool: &fakePool{p: prov}, Models: fakeModels(nil)})
	if !errors.Is(err, errPoolNeedsDirWorkspaces) {
		t.Fatalf("New = %v, want errPoolNeedsDirWorkspaces", err)
	}
}

func TestSandboxTemplate(t *testing.T) {
	w, _ := New(Config{Workspaces: &fakeWorkspaces{}, Sandboxes: &fakeProvider{}, Models: fakeModels(nil),
		DefaultImage: "img:1", Sandbox: SandboxDefaults{MemoryMB: 1024}})
	s := w.SandboxTemplate()
	if s.Image != "img:1" || s.MemoryBytes != 1024<<20 || s.Pids != 512 || s.WorkspaceDir != "" {
		t.Fatalf("template %+v", s)
	}
}
