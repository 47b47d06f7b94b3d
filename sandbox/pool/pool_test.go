package pool_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/pool"
)

// fakeProvider starts fakeSandboxes and counts what is alive.
type fakeProvider struct {
	mu      sync.Mutex
	n       int
	live    map[string]*fakeSandbox
	specs   []sandbox.Spec
	failing bool
}

func newFakeProvider() *fakeProvider { return &fakeProvider{live: map[string]*fakeSandbox{}} }

func (p *fakeProvider) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failing {
		return nil, &sandbox.Error{Kind: sandbox.ErrUnavailable, Op: "start", Err: errors.New("engine down")}
	}
	if _, err := os.Stat(spec.WorkspaceDir); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	p.n++
	sb := &fakeSandbox{p: p, id: fmt.Sprintf("sb-%d", p.n), spec: spec}
	p.live[sb.id] = sb
	p.specs = append(p.specs, spec)
	return sb, nil
}

func (p *fakeProvider) setFailing(v bool) {
	p.mu.Lock()
	p.failing = v
	p.mu.Unlock()
}

func (p *fakeProvider) liveCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.live)
}

type fakeSandbox struct {
	p       *fakeProvider
	id      string
	spec    sandbox.Spec
	mu      sync.Mutex
	adopted *sandbox.Spec
	dead    bool
}

func (s *fakeSandbox) ID() string { return s.id }
func (s *fakeSandbox) Adopt(_ context.Context, spec sandbox.Spec) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return &sandbox.Error{Kind: sandbox.ErrGone, Op: "adopt", Err: errors.New("dead")}
	}
	if s.adopted != nil {
		return errors.New("adopted twice")
	}
	s.adopted = &spec
	return nil
}
func (s *fakeSandbox) Close(context.Context) error {
	s.p.mu.Lock()
	delete(s.p.live, s.id)
	s.p.mu.Unlock()
	return nil
}
func (s *fakeSandbox) Exec(context.Context, sandbox.ExecRequest) (sandbox.ExecResult, error) {
	return sandbox.ExecResult{}, nil
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

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var template = sandbox.Spec{Image: "img:1", MemoryBytes: 1 << 30, Pids: 100}

func newPool(t *testing.T, prov sandbox.Provider, cfg pool.Config) *pool.Pool {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	cfg.Logger = quiet
	if cfg.Template.Image == "" {
		cfg.Template = template
	}
	p, err := pool.New(prov, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	return p
}

// eventually polls cond for up to 10 s (a bound on waiting, not a speed
// assertion).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestWarmHandOut(t *testing.T) {
	prov := newFakeProvider()
	p := newPool(t, prov, pool.Config{Size: 2})
	eventually(t, "2 ready", func() bool { return p.Stats().Ready == 2 })

	spec := template
	spec.Env, spec.Timeout, spec.TaskID = map[string]string{"K": "v"}, time.Hour, "t1"
	lease, err := p.Acquire(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if !lease.Warm {
		t.Fatal("lease not warm")
	}
	sb := lease.Sandbox.(*fakeSandbox)
	if sb.adopted == nil || !maps.Equal(sb.adopted.Env, spec.Env) || sb.adopted.Timeout != time.Hour {
		t.Errorf("adopted with %+v", sb.adopted)
	}
	if sb.spec.WorkspaceDir != lease.WorkspaceDir || sb.spec.TaskID != pool.WarmTaskID || sb.spec.Env != nil {
		t.Errorf("started with %+v, lease dir %s", sb.spec, lease.WorkspaceDir)
	}
	if entries, err := os.ReadDir(lease.WorkspaceDir); err != nil || len(entries) != 0 {
		t.Errorf("workspace dir %s: %v entries, %v", lease.WorkspaceDir, len(entries), err)
	}
	eventually(t, "refill to 2", func() bool { return p.Stats().Ready == 2 })

	if err := lease.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lease.WorkspaceDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("workspace dir after Release: %v", err)
	}
}

func TestColdWhenNoMatch(t *testing.T) {
	prov := newFakeProvider()
	p := newPool(t, prov, pool.Config{Size: 1})
	eventually(t, "1 ready", func() bool { return p.Stats().Ready == 1 })
	own := t.TempDir()
	tests := []struct {
		name string
		mod  func(*sandbox.Spec)
	}{
		{"other image", func(s *sandbox.Spec) { s.Image = "img:2" }},
		{"other memory", func(s *sandbox.Spec) { s.MemoryBytes = 2 << 30 }},
		{"network", func(s *sandbox.Spec) { s.Network = "bridge" }},
		{"runtime", func(s *sandbox.Spec) { s.Runtime = "runsc" }},
		{"own workspace", func(s *sandbox.Spec) { s.WorkspaceDir = own }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := template
			tt.mod(&spec)
			lease, err := p.Acquire(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			defer lease.Release(context.Background())
			if lease.Warm {
				t.Error("mismatched spec got a warm sandbox")
			}
			if got := lease.Sandbox.(*fakeSandbox).spec; got.Image != spec.Image || got.MemoryBytes != spec.MemoryBytes || got.Network != spec.Network {
				t.Errorf("started %+v for %+v", got, spec)
			}
			if spec.WorkspaceDir != "" && lease.WorkspaceDir != spec.WorkspaceDir {
				t.Errorf("lease dir %s, want the caller's %s", lease.WorkspaceDir, spec.WorkspaceDir)
			}
		})
	}
	if st := p.Stats(); st.Ready != 1 || st.Hits != 0 || st.Misses != uint64(len(tests)) {
		t.Errorf("stats = %+v", st)
	}
	// "none" and "" are the same network.
	spec := template
	spec.Network = "none"
	lease, err := p.Acquire(context.Background(), spec)
	if err != nil || !lease.Warm {
		t.Fatalf("Acquire with network none = %+v, %v; want warm", lease, err)
	}
	lease.Release(context.Background())
}

func TestNeverHandedOutTwice(t *testing.T) {
	prov := newFakeProvider()
	p := newPool(t, prov, pool.Config{Size: 4})
	eventually(t, "4 ready", func() bool { return p.Stats().Ready == 4 })
	const n = 40
	leases := make(chan *pool.Lease, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := p.Acquire(context.Background(), template)
			if err != nil {
				t.Error(err)
				return
			}
			leases <- l
		}()
	}
	wg.Wait()
	close(leases)
	ids, dirs := map[string]bool{}, map[string]bool{}
	warm := 0
	for l := range leases {
		if ids[l.Sandbox.ID()] || dirs[l.WorkspaceDir] {
			t.Errorf("%s / %s handed out twice", l.Sandbox.ID(), l.WorkspaceDir)
		}
		ids[l.Sandbox.ID()], dirs[l.WorkspaceDir] = true, true
		if l.Warm {
			warm++
		}
		l.Release(context.Background())
	}
	if warm < 4 {
		t.Errorf("%d warm leases, want at least the 4 ready", warm)
	}
}

func TestIdleRecycled(t *testing.T) {
	prov := newFakeProvider()
	p := newPool(t, prov, pool.Config{Size: 2, MaxIdle: 20 * time.Millisecond})
	eventually(t, "replacements", func() bool { return p.Stats().Recycled >= 2 })
	eventually(t, "refilled", func() bool { return p.Stats().Ready == 2 })
	eventually(t, "old ones closed", func() bool { return prov.liveCount() <= 2 })
}

func TestDeadWarmSandboxSkipped(t *testing.T) {
	prov := newFakeProvider()
	p := newPool(t, prov, pool.Config{Size: 1})
	eventually(t, "1 ready", func() bool { return p.Stats().Ready == 1 })
	prov.mu.Lock()
	for _, sb := range prov.live {
		sb.dead = true
	}
	prov.mu.Unlock()
	lease, err := p.Acquire(context.Background(), template)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	if lease.Sandbox.(*fakeSandbox).dead {
		t.Error("got the dead sandbox")
	}
	if st := p.Stats(); st.Recycled != 1 {
		t.Errorf("stats = %+v, want the dead one recycled", st)
	}
}

func TestStartFailuresBackOff(t *testing.T) {
	prov := newFakeProvider()
	prov.setFailing(true)
	dir := t.TempDir()
	p := newPool(t, prov, pool.Config{Size: 1, Dir: dir})
	eventually(t, "a start error", func() bool { return p.Stats().StartErrors >= 1 })
	_, err := p.Acquire(context.Background(), template)
	if sandbox.KindOf(err) != sandbox.ErrUnavailable {
		t.Fatalf("Acquire with the engine down = %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("workspace dirs left after failed starts: %d", len(entries))
	}
	prov.setFailing(false)
	eventually(t, "recovery", func() bool { return p.Stats().Ready == 1 })
}

func TestCloseLeavesNothing(t *testing.T) {
	prov := newFakeProvider()
	dir := t.TempDir()
	p, err := pool.New(prov, pool.Config{Size: 3, Template: template, Dir: dir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "3 ready", func() bool { return p.Stats().Ready == 3 })
	lease, err := p.Acquire(context.Background(), template)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := prov.liveCount(); n != 1 {
		t.Errorf("%d sandboxes alive after Close, want only the leased one", n)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d workspace dirs after Close, want the leased one", len(entries))
	}
	if _, err := p.Acquire(context.Background(), template); !errors.Is(err, pool.ErrClosed) {
		t.Errorf("Acquire after Close = %v", err)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Errorf("second Close = %v", err)
	}
	lease.Release(context.Background())
	if n := prov.liveCount(); n != 0 {
		t.Errorf("%d alive after Release", n)
	}
}

func TestSizeZeroStartsOnDemand(t *testing.T) {
	prov := newFakeProvider()
	p := newPool(t, prov, pool.Config{})
	lease, err := p.Acquire(context.Background(), sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Warm || lease.WorkspaceDir == "" {
		t.Errorf("lease = %+v", lease)
	}
	lease.Release(context.Background())
	if prov.liveCount() != 0 || p.Stats().Ready != 0 {
		t.Errorf("live %d ready %d", prov.liveCount(), p.Stats().Ready)
	}
}

func TestNewInvalid(t *testing.T) {
	if _, err := pool.New(newFakeProvider(), pool.Config{Size: -1}); err == nil {
		t.Error("negative size accepted")
	}
	if _, err := pool.New(newFakeProvider(), pool.Config{Size: 1, Dir: t.TempDir()}); err == nil {
		t.Error("warm pool without an image accepted")
	}
}
