// Package pool keeps sandboxes started ahead of time so a task gets one in
// a round trip instead of a container start.
//
// # Workspaces
//
// A started container cannot be given a new bind mount, so a warm sandbox
// is started with its own empty host directory mounted at /workspace, and
// that directory travels with it: [Pool.Acquire] returns a [Lease] holding
// the sandbox and its host WorkspaceDir, and the caller fills that
// directory (clone the task's repository into it) after acquiring. The
// directory is a fresh one under [Config.Dir] for every sandbox, so no two
// tasks ever share one. When the caller brings its own populated directory
// (Spec.WorkspaceDir set), no warm sandbox can serve it and Acquire starts
// one for it (Lease.Warm is false).
//
// # Matching
//
// A warm sandbox is handed out when the spec's Image, Network, limits and
// Runtime equal the template's (zero meaning the provider default on both
// sides). The task's Env and Timeout are applied at hand-out through
// [Adopter] (the docker backend implements it); TaskID labels cannot
// change, so warm containers carry the task label "warm-pool".
//
// # Lifecycle
//
// One background goroutine keeps Size sandboxes ready per image, starting
// them one at a time (with backoff when starts fail), and replaces any
// that stayed idle longer than MaxIdle. A sandbox is removed from the
// ready set under a lock before it is handed out, so it is never handed
// out twice. Close stops the goroutine, waits for it and closes every
// sandbox not handed out; leased ones belong to their callers.
package pool

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
)

// ErrClosed is returned by Acquire after Close.
var ErrClosed = errors.New("pool closed")

// WarmTaskID is the task label of sandboxes started by a pool.
const WarmTaskID = "warm-pool"

// Adopter is implemented by sandboxes that can be handed to a task after
// they started: Adopt applies the task's Env and Timeout (restarting the
// lifetime) and checks the sandbox is alive.
type Adopter interface {
	Adopt(ctx context.Context, spec sandbox.Spec) error
}

// Config configures a [Pool].
type Config struct {
	// Size is how many ready sandboxes to keep per image; 0 keeps none
	// (every Acquire starts one), as `wrench run` does.
	Size int
	// Template is what ready sandboxes are started with; its WorkspaceDir,
	// TaskID, Env and Timeout are ignored.
	Template sandbox.Spec
	// Images lists the images to keep warm, each with Template's other
	// fields; empty means Template.Image alone.
	Images []string
	// Dir is where per-sandbox workspace directories are made (default
	// $TMPDIR/wrench-pool). It must be on the host the engine runs on.
	Dir string
	// MaxIdle is how long a ready sandbox may wait before it is replaced
	// (default 10 minutes).
	MaxIdle time.Duration
	// StartTimeout bounds one background start (default 2 minutes).
	StartTimeout time.Duration
	// Logger receives refill failures (default slog.Default()).
	Logger *slog.Logger
	// BeforeStart, when set, may change the spec of every sandbox the pool
	// starts (give it an egress session, say); release is called once the
	// sandbox is discarded or its lease released.
	BeforeStart func(ctx context.Context, spec *sandbox.Spec) (release func(), err error)
}

// Lease is a sandbox handed out by [Pool.Acquire].
type Lease struct {
	// Sandbox is started and ready.
	Sandbox sandbox.Sandbox
	// WorkspaceDir is the host directory mounted at /workspace. For a
	// pool-made directory it is empty at hand-out and owned by the sandbox
	// user; the caller fills it, and owns it from now on.
	WorkspaceDir string
	// Warm says the sandbox came ready from the pool.
	Warm bool

	ownDir  bool
	release func()
}

// Release closes the sandbox and, when the pool made the workspace
// directory, removes it.
func (l *Lease) Release(ctx context.Context) error {
	err := l.Sandbox.Close(ctx)
	if l.ownDir {
		err = errors.Join(err, os.RemoveAll(l.WorkspaceDir))
	}
	if l.release != nil {
		l.release()
		l.release = nil
	}
	return err
}

// Stats counts what a pool did.
type Stats struct {
	Ready       int    // sandboxes ready now
	Hits        uint64 // Acquires served warm
	Misses      uint64 // Acquires that started a sandbox
	Recycled    uint64 // ready sandboxes replaced after MaxIdle or found dead
	StartErrors uint64 // failed background starts
}

type slot struct {
	sb      sandbox.Sandbox
	dir     string
	ready   time.Time
	release func()
}

// Pool hands out started sandboxes. It is safe for concurrent use.
type Pool struct {
	prov   sandbox.Provider
	cfg    Config
	images []string

	mu     sync.Mutex
	ready  map[string][]*slot // by image, oldest first
	closed bool
	stats  Stats

	wake   chan struct{}
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a pool over prov and, when Size > 0, starts filling it in
// the background. Call [Pool.Close] when done.
func New(prov sandbox.Provider, cfg Config) (*Pool, error) {
	if cfg.Size < 0 {
		return nil, fmt.Errorf("pool: size %d is negative", cfg.Size)
	}
	images := cfg.Images
	if len(images) == 0 {
		images = []string{cfg.Template.Image}
	}
	if cfg.Size > 0 && !cfg.Template.WritableRoot {
		for _, img := range images {
			if img == "" {
				return nil, errors.New("pool: name the images to keep warm (Template.Image or Images)")
			}
		}
	}
	if len(cfg.Images) == 0 && cfg.Template.Image == "" {
		images = nil // SetImages names them later
	}
	if cfg.Dir == "" {
		cfg.Dir = filepath.Join(os.TempDir(), "wrench-pool")
	}
	if cfg.MaxIdle <= 0 {
		cfg.MaxIdle = 10 * time.Minute
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 2 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("pool: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{prov: prov, cfg: cfg, images: images, ready: map[string][]*slot{}, wake: make(chan struct{}, 1), cancel: cancel}
	if cfg.Size > 0 {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.run(ctx)
		}()
	}
	return p, nil
}

// Acquire returns a started sandbox for spec: a warm one when spec
// matches the template and one is ready, otherwise one started now. With
// spec.WorkspaceDir set the sandbox mounts that directory (never warm);
// without, it gets a fresh directory under Config.Dir (see Lease).
func (p *Pool) Acquire(ctx context.Context, spec sandbox.Spec) (*Lease, error) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if spec.WorkspaceDir == "" {
		for {
			s := p.take(spec)
			if s == nil {
				break
			}
			if err := p.adopt(ctx, s.sb, spec); err != nil {
				if ctx.Err() != nil {
					p.discard(s)
					return nil, err
				}
				p.cfg.Logger.Warn("warm sandbox unusable; discarding it", "id", s.sb.ID(), "err", err)
				p.discard(s)
				p.count(func(st *Stats) { st.Recycled++ })
				continue
			}
			p.count(func(st *Stats) { st.Hits++ })
			return &Lease{Sandbox: s.sb, WorkspaceDir: s.dir, Warm: true, ownDir: s.dir != "", release: s.release}, nil
		}
	}
	p.mu.Lock()
	closed = p.closed
	p.stats.Misses++
	p.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	return p.startCold(ctx, spec)
}

func (p *Pool) startCold(ctx context.Context, spec sandbox.Spec) (*Lease, error) {
	lease := &Lease{WorkspaceDir: spec.WorkspaceDir}
	if spec.WorkspaceDir == "" && !spec.WritableRoot {
		dir, err := p.newDir()
		if err != nil {
			return nil, err
		}
		spec.WorkspaceDir, lease.WorkspaceDir, lease.ownDir = dir, dir, true
	}
	sb, release, err := p.start(ctx, spec)
	if err != nil {
		if lease.ownDir {
			os.RemoveAll(lease.WorkspaceDir)
		}
		return nil, err
	}
	lease.Sandbox, lease.release = sb, release
	return lease, nil
}

// start starts one sandbox, through BeforeStart when set.
func (p *Pool) start(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, func(), error) {
	var release func()
	if p.cfg.BeforeStart != nil {
		var err error
		if release, err = p.cfg.BeforeStart(ctx, &spec); err != nil {
			return nil, nil, err
		}
	}
	sb, err := p.prov.Start(ctx, spec)
	if err != nil {
		if release != nil {
			release()
		}
		return nil, nil, err
	}
	return sb, release, nil
}

// SetImages changes the images kept warm: ready sandboxes of images no
// longer listed are closed, and new ones are started in the background.
func (p *Pool) SetImages(images []string) {
	want := map[string]bool{}
	for _, img := range images {
		want[img] = true
	}
	var drop []*slot
	p.mu.Lock()
	p.images = append([]string(nil), images...)
	for img, list := range p.ready {
		if !want[img] {
			drop = append(drop, list...)
			delete(p.ready, img)
		}
	}
	p.mu.Unlock()
	for _, s := range drop {
		p.discard(s)
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// take removes and returns the oldest ready slot matching spec, or nil.
func (p *Pool) take(spec sandbox.Spec) *slot {
	if !matches(p.cfg.Template, spec) {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	list := p.ready[spec.Image]
	if len(list) == 0 {
		return nil
	}
	s := list[0]
	p.ready[spec.Image] = list[1:]
	select { // refill
	case p.wake <- struct{}{}:
	default:
	}
	return s
}

func (p *Pool) adopt(ctx context.Context, sb sandbox.Sandbox, spec sandbox.Spec) error {
	if a, ok := sb.(Adopter); ok {
		return a.Adopt(ctx, spec)
	}
	if len(spec.Env) > 0 || spec.Timeout != 0 {
		return errors.New("sandbox cannot adopt a task's env or timeout")
	}
	return nil
}

// matches says whether a sandbox started from tmpl (with spec's image)
// can serve spec.
func matches(tmpl, spec sandbox.Spec) bool {
	network := func(n string) string {
		if n == "" {
			return "none"
		}
		return n
	}
	return network(tmpl.Network) == network(spec.Network) && tmpl.WritableRoot == spec.WritableRoot &&
		tmpl.MemoryBytes == spec.MemoryBytes && tmpl.NanoCPUs == spec.NanoCPUs &&
		tmpl.Pids == spec.Pids && tmpl.DiskBytes == spec.DiskBytes && tmpl.Runtime == spec.Runtime
}

// Stats returns the pool's counters.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stats
	for _, list := range p.ready {
		st.Ready += len(list)
	}
	return st
}

func (p *Pool) count(f func(*Stats)) {
	p.mu.Lock()
	f(&p.stats)
	p.mu.Unlock()
}

// Close stops refilling, waits for the background goroutine and closes
// every sandbox not handed out (removing their directories).
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()

	p.mu.Lock()
	var slots []*slot
	for img, list := range p.ready {
		slots = append(slots, list...)
		delete(p.ready, img)
	}
	p.mu.Unlock()
	errs := make([]error, len(slots))
	var wg sync.WaitGroup
	for i, s := range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = errors.Join(s.sb.Close(ctx), removeDir(s.dir))
			if s.release != nil {
				s.release()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (p *Pool) discard(s *slot) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.sb.Close(ctx); err != nil {
		p.cfg.Logger.Warn("close pooled sandbox", "id", s.sb.ID(), "err", err)
	}
	removeDir(s.dir)
	if s.release != nil {
		s.release()
	}
}

func removeDir(dir string) error {
	if dir == "" {
		return nil
	}
	return os.RemoveAll(dir)
}

func (p *Pool) newDir() (string, error) {
	var b [8]byte
	rand.Read(b[:])
	dir := filepath.Join(p.cfg.Dir, "ws-"+hex.EncodeToString(b[:]))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("pool: workspace dir: %w", err)
	}
	return dir, nil
}
