package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"
	"sync/atomic"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/environment"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
	"github.com/wrenchworks/wrench/workspace"
)

const fakeCommit = "0123456789abcdef0123456789abcdef01234567"

// fakeSources resolves every repository to a fakeSource holding files, or
// fails with err.
type fakeSources struct {
	err   error
	files map[string]string
	// progress is written to the clone's progress writer, if any.
	progress string
	mu       sync.Mutex
	opened   []*fakeSource
}

func (f *fakeSources) Resolve(ctx context.Context, repo task.Repo) (Source, error) {
	if f.err != nil {
		return nil, f.err
	}
	if w := workspace.ProgressOf(ctx); w != nil && f.progress != "" {
		_, _ = io.WriteString(w, f.progress)
	}
	s := &fakeSource{files: f.files}
	f.mu.Lock()
	f.opened = append(f.opened, s)
	f.mu.Unlock()
	return s, nil
}

func (f *fakeSources) allClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.opened {
		if !s.closed.Load() {
			return false
		}
	}
	return true
}

type fakeSource struct {
	files  map[string]string
	closed atomic.Bool
}

func (s *fakeSource) Hash() string { return fakeCommit }
func (s *fakeSource) Files() map[string]string {
	out := map[string]string{}
	for p := range s.files {
		out[p] = "blob-of-" + p
	}
	return out
}
func (s *fakeSource) Checkout() workspace.Checkout { return workspace.Checkout{Commit: fakeCommit} }
func (s *fakeSource) Pack(context.Context, io.Writer, []string) (int, error) {
	return 0, nil
}
func (s *fakeSource) ReadFile(p string, max int64) ([]byte, error) {
	if c, ok := s.files[p]; ok {
		return []byte(c), nil
	}
	return nil, fmt.Errorf("%s: %w", p, fs.ErrNotExist)
}
func (s *fakeSource) Clone(context.Context, string) (environment.Clone, error) {
	return nil, errors.New("fake sources do not clone")
}
func (s *fakeSource) Close() { s.closed.Store(true) }

// fakeEnvironments prepares fakeSandboxes whose test command passes once
// fixed is set (by the fake agent), or fails with err.
type fakeEnvironments struct {
	err     error
	diff    string // the sandboxes' diff (a default one when empty)
	diffErr error  // returned by Diff (with diff) when set
	fixed   atomic.Bool
	mu      sync.Mutex
	started []*fakeSandbox
	req     environment.Request
}

func (e *fakeEnvironments) Prepare(ctx context.Context, req environment.Request) (*environment.Prepared, error) {
	e.mu.Lock()
	e.req = req
	e.mu.Unlock()
	if e.err != nil {
		return nil, e.err
	}
	s := &fakeSandbox{e: e, diff: e.diff, diffErr: e.diffErr}
	e.mu.Lock()
	e.started = append(e.started, s)
	e.mu.Unlock()
	return &environment.Prepared{
		Sandbox: s,
		Base:    workspace.Base{Commit: fakeCommit, Checkpoint: "base-cp"},
		Setup:   &task.SetupRun{Snapshot: task.SnapshotHit, Key: "k1", Passed: true},
	}, nil
}

// diffs counts the Diff calls of every sandbox started.
func (e *fakeEnvironments) diffs() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, s := range e.started {
		n += int(s.diffs.Load())
	}
	return n
}

func (e *fakeEnvironments) allClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.started {
		if !s.closed.Load() {
			return false
		}
	}
	return true
}

type fakeSandbox struct {
	e       *fakeEnvironments
	closed  atomic.Bool
	diff    string
	diffErr error
	diffs   atomic.Int32 // calls of Diff
}

func (s *fakeSandbox) ID() string { return "fake" }
func (s *fakeSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if err := ctx.Err(); err != nil {
		return sandbox.ExecResult{ExitCode: -1}, err
	}
	if s.e.fixed.Load() {
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
func (s *fakeSandbox) Checkpoint(context.Context, string) (string, error) {
	return "c1", nil
}
func (s *fakeSandbox) Rollback(context.Context, string) error { return nil }
func (s *fakeSandbox) Diff(context.Context) (string, error) {
	s.diffs.Add(1)
	if s.diffErr != nil {
		return s.diff, s.diffErr
	}
	if s.diff == "" {
		return "diff --git a/x b/x\n", nil
	}
	return s.diff, nil
}

// fakeAgent plays an outcome; when fix is set it marks the sandbox fixed,
// and when block is set it waits for the context to end.
type fakeAgent struct {
	last   *agent.Run
	reason agent.StopReason
	err    error
	fix    *fakeEnvironments
	block  bool
	// runErr, when set, is returned with no outcome (a refused run).
	runErr error
	// history is the outcome's FileHistory.
	history map[string][]agent.FileVersion
	// summary is the outcome's summary ("done" when empty).
	summary string
}

func (a *fakeAgent) Run(ctx context.Context, r *agent.Run) (*agent.Outcome, error) {
	a.last = r
	if a.runErr != nil {
		return nil, a.runErr
	}
	if a.block {
		<-ctx.Done()
		return &agent.Outcome{Reason: agent.StopCancelled}, nil
	}
	r.OnEvent(task.Event{Kind: task.EventToolCall, Tool: "bash", Text: "go test ./..."})
	if a.fix != nil {
		a.fix.fixed.Store(true)
	}
	summary := a.summary
	if summary == "" {
		summary = "done"
	}
	return &agent.Outcome{Reason: a.reason, Err: a.err, Summary: summary, Usage: task.Usage{Turns: 2, ToolCalls: 3}, FileHistory: a.history}, nil
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
