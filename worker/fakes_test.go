package worker

import (
	"context"
	"errors"
	"io/fs"
	"sync"
	"sync/atomic"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

// fakeWorkspaces hands out fakeWorkspaces, or fails with err.
type fakeWorkspaces struct {
	err    error
	mu     sync.Mutex
	opened []*fakeWorkspace
}

func (f *fakeWorkspaces) Open(ctx context.Context, id string, repo task.Repo) (Workspace, error) {
	if f.err != nil {
		return nil, f.err
	}
	w := &fakeWorkspace{dir: "/tmp/ws-" + id}
	f.mu.Lock()
	f.opened = append(f.opened, w)
	f.mu.Unlock()
	return w, nil
}

func (f *fakeWorkspaces) allClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.opened {
		if !w.closed.Load() {
			return false
		}
	}
	return true
}

type fakeWorkspace struct {
	dir    string
	diff   string
	closed atomic.Bool
}

func (w *fakeWorkspace) Dir() string        { return w.dir }
func (w *fakeWorkspace) BaseCommit() string { return "0123456789abcdef" }
func (w *fakeWorkspace) Close() error       { w.closed.Store(true); return nil }
func (w *fakeWorkspace) Checkpoint(context.Context, string) (string, error) {
	return "c1", nil
}
func (w *fakeWorkspace) Rollback(context.Context, string) error { return nil }
func (w *fakeWorkspace) Diff(context.Context) (string, error) {
	if w.diff == "" {
		return "diff --git a/x b/x\n", nil
	}
	return w.diff, nil
}

// fakeProvider starts fakeSandboxes whose test command passes once fixed
// is set (by the fake agent), or fails to start with err.
type fakeProvider struct {
	err     error
	fixed   atomic.Bool
	mu      sync.Mutex
	started []*fakeSandbox
	spec    sandbox.Spec
}

func (p *fakeProvider) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if p.err != nil {
		return nil, p.err
	}
	s := &fakeSandbox{p: p}
	p.mu.Lock()
	p.started = append(p.started, s)
	p.spec = spec
	p.mu.Unlock()
	return s, nil
}

func (p *fakeProvider) allClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.started {
		if !s.closed.Load() {
			return false
		}
	}
	return true
}

type fakeSandbox struct {
	p      *fakeProvider
	closed atomic.Bool
}

func (s *fakeSandbox) ID() string { return "fake" }
func (s *fakeSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if err := ctx.Err(); err != nil {
		return sandbox.ExecResult{ExitCode: -1}, err
	}
	if s.p.fixed.Load() {
		return sandbox.ExecResult{Output: []byte("ok")}, nil
	}
	return sandbox.ExecResult{ExitCode: 1, Output: []byte("FAIL")}, nil
}
func (s *fakeSandbox) ReadFile(context.Context, string) ([]byte, error) { return nil, fs.ErrNotExist }
func (s *fakeSandbox) WriteFile(context.Context, string, []byte, fs.FileMode) error {
	return nil
}
func (s *fakeSandbox) Remove(context.Context, string) error { return nil }
func (s *fakeSandbox) Stat(context.Context, string) (sandbox.FileInfo, error) {
	return sandbox.FileInfo{}, fs.ErrNotExist
}
func (s *fakeSandbox) ListDir(context.Context, string) ([]sandbox.FileInfo, error) { return nil, nil }
func (s *fakeSandbox) Glob(context.Context, string, string) ([]string, error)      { return nil, nil }
func (s *fakeSandbox) Grep(context.Context, sandbox.GrepRequest) ([]sandbox.GrepMatch, error) {
	return nil, nil
}
func (s *fakeSandbox) Close(context.Context) error { s.closed.Store(true); return nil }

// fakeAgent plays an outcome; when fix is set it marks the sandbox fixed,
// and when block is set it waits for the context to end.
type fakeAgent struct {
	last   *agent.Run
	reason agent.StopReason
	err    error
	fix    *fakeProvider
	block  bool
}

func (a *fakeAgent) Run(ctx context.Context, r *agent.Run) (*agent.Outcome, error) {
	a.last = r
	if a.block {
		<-ctx.Done()
		return &agent.Outcome{Reason: agent.StopCancelled}, nil
	}
	r.OnEvent(task.Event{Kind: task.EventToolCall, Tool: "bash", Text: "go test ./..."})
	if a.fix != nil {
		a.fix.fixed.Store(true)
	}
	return &agent.Outcome{Reason: a.reason, Err: a.err, Summary: "done", Usage: task.Usage{Turns: 2, ToolCalls: 3}}, nil
}

func fakeModels(err error) ModelOpener {
	return func(context.Context, string) (agent.Model, string, func() error, error) {
		if err != nil {
			return nil, "", nil, err
		}
		return nil, "fake-model", func() error { return nil }, nil
	}
}

var errBoom = errors.New("boom")

// OpenIn makes fakeWorkspaces a DirWorkspaces.
func (f *fakeWorkspaces) OpenIn(ctx context.Context, id, dir string, repo task.Repo) (Workspace, error) {
	if f.err != nil {
		return nil, f.err
	}
	w := &fakeWorkspace{dir: dir}
	f.mu.Lock()
	f.opened = append(f.opened, w)
	f.mu.Unlock()
	return w, nil
}

// onlyOpen hides OpenIn, for the check that a pool needs it.
type onlyOpen struct{ w *fakeWorkspaces }

func (o onlyOpen) Open(ctx context.Context, id string, repo task.Repo) (Workspace, error) {
	return o.w.Open(ctx, id, repo)
}

// fakePool leases fakeSandboxes of its provider with directories of its own.
type fakePool struct {
	p        *fakeProvider
	err      error
	mu       sync.Mutex
	leases   []*fakeLease
	acquired sandbox.Spec
}

func (f *fakePool) Acquire(ctx context.Context, spec sandbox.Spec) (Lease, error) {
	if f.err != nil {
		return nil, f.err
	}
	sb, _ := f.p.Start(ctx, spec)
	l := &fakeLease{sb: sb, dir: "/pool/dir-1"}
	f.mu.Lock()
	f.leases = append(f.leases, l)
	f.acquired = spec
	f.mu.Unlock()
	return l, nil
}

func (f *fakePool) allReleased() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.leases {
		if !l.released.Load() {
			return false
		}
	}
	return true
}

type fakeLease struct {
	sb       sandbox.Sandbox
	dir      string
	released atomic.Bool
}

func (l *fakeLease) Sandbox() sandbox.Sandbox { return l.sb }
func (l *fakeLease) Dir() string              { return l.dir }
func (l *fakeLease) Release(ctx context.Context) error {
	l.released.Store(true)
	return l.sb.Close(ctx)
}
