package docker

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/docker/docker/client"

	"github.com/wrenchworks/wrench/sandbox"
)

// Config configures a [Provider]. Zero values take the defaults noted.
type Config struct {
	// Engine is the engine to run sandboxes on. Nil makes one with
	// [FromEnv], owned and closed by the Provider.
	Engine *Engine
	// DefaultImage is used when a Spec names none (default
	// sandbox.DefaultImage, built by `wrench image build`).
	DefaultImage string
	// ShimPath is the host path of the static wrench binary whose hidden
	// `__shim` subcommand serves the sandbox (default: this executable).
	// It is bind-mounted read-only into every sandbox.
	ShimPath string
	// User runs everything in the sandbox (default sandbox.User(),
	// 1000:1000); never root.
	User string
	// HomeDir is the user's home inside the sandbox, a tmpfs (default
	// sandbox.HomeDir).
	HomeDir string
	// Deployment is put on every container's labels (default "default").
	Deployment string
	// Runtime is the OCI runtime when a Spec names none ("" is the
	// engine's default; "runsc" for gVisor, when installed).
	Runtime string
	// Default limits, used when a Spec leaves them zero: the sandbox
	// package's defaults (sandbox.DefaultMemoryBytes and the others: 2 GiB
	// of memory, no swap; 2 CPUs, at most the engine's; 512 processes;
	// 2 GiB of disk per writable area) and a 2 hour lifetime.
	MemoryBytes int64
	NanoCPUs    int64
	Pids        int64
	DiskBytes   int64
	Timeout     time.Duration
	// ExecTimeout and MaxOutput are the per-command defaults (10 minutes,
	// 1 MiB).
	ExecTimeout time.Duration
	MaxOutput   int
	// WatchInterval is how often the workspace size is checked against
	// DiskBytes (default 2 s; slower when a check itself is slow).
	WatchInterval time.Duration
	// MaxPatchBytes caps the patch a sandbox's workspace hands back
	// (default 16 MiB); a larger one is an error saying so.
	MaxPatchBytes int64
	// ReadyTimeout bounds creating the container, and then starting it up
	// to the shim's hello (default 60 s each).
	ReadyTimeout time.Duration
	// TreeTimeout bounds copying Spec.Tree into the container, which takes
	// as long as the repository is large (default 10 min).
	TreeTimeout time.Duration
	// NoInit runs the shim as the container's PID 1 instead of under the
	// engine's init (docker-init), which reaps orphaned processes. Set it
	// only for engines without an init binary.
	NoInit bool
	// Logger receives lifecycle logs (default slog.Default()).
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.DefaultImage == "" {
		c.DefaultImage = sandbox.DefaultImage
	}
	if c.ShimPath == "" {
		exe, err := os.Executable()
		if err != nil {
			return c, fmt.Errorf("find the shim binary (set ShimPath): %w", err)
		}
		c.ShimPath = exe
	}
	if c.User == "" {
		c.User = sandbox.User()
	}
	if c.HomeDir == "" {
		c.HomeDir = sandbox.HomeDir
	}
	if c.Deployment == "" {
		c.Deployment = "default"
	}
	setDefault(&c.MemoryBytes, sandbox.DefaultMemoryBytes)
	setDefault(&c.NanoCPUs, sandbox.DefaultNanoCPUs)
	setDefault(&c.Pids, sandbox.DefaultPids)
	setDefault(&c.DiskBytes, sandbox.DefaultDiskBytes)
	setDefault(&c.Timeout, 2*time.Hour)
	setDefault(&c.ExecTimeout, 10*time.Minute)
	setDefault(&c.MaxOutput, 1<<20)
	setDefault(&c.WatchInterval, 2*time.Second)
	setDefault(&c.ReadyTimeout, 60*time.Second)
	setDefault(&c.TreeTimeout, 10*time.Minute)
	setDefault(&c.MaxPatchBytes, 16<<20)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

func setDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

// Provider starts hardened Docker sandboxes. It is safe for concurrent use.
type Provider struct {
	cfg        Config
	eng        *Engine
	cli        *client.Client // eng's
	ownsEngine bool
	shimStatic bool
	host       string
	owner      map[string]string // sandbox.OwnerLabels

	infoMu sync.Mutex
	info   *Info

	engineSizes chan struct{} // one engine layer-size request at a time
}

var _ sandbox.Provider = (*Provider)(nil)

// New checks the configuration and the shim binary and returns a Provider.
// It tries to reach the engine with ctx but succeeds without it: an engine
// that is down now fails each Start with [sandbox.ErrUnavailable] until it
// is back. Call [Provider.Close] when done.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkLimits("new", cfg.MemoryBytes, cfg.NanoCPUs, cfg.Pids, cfg.DiskBytes, cfg.Timeout); err != nil {
		return nil, err
	}
	if err := checkUser(cfg.User); err != nil {
		return nil, invalid("new", "%v", err)
	}
	if err := checkImage("new", cfg.DefaultImage); err != nil {
		return nil, err
	}
	static, err := inspectShim(cfg.ShimPath)
	if err != nil {
		return nil, invalid("new", "shim binary: %v", err)
	}
	p := &Provider{cfg: cfg, eng: cfg.Engine, shimStatic: static, engineSizes: make(chan struct{}, 1)}
	p.host, _ = os.Hostname()
	p.owner = sandbox.OwnerLabels(p.host)
	if !static {
		cfg.Logger.Warn("shim binary is dynamically linked; it only runs in images with a compatible libc (build wrench with CGO_ENABLED=0)", "path", cfg.ShimPath)
	}
	if p.eng == nil {
		if p.eng, err = FromEnv(); err != nil {
			return nil, err
		}
		p.ownsEngine = true
	}
	p.cli = p.eng.cli
	if _, err := p.engineInfo(ctx); err != nil {
		cfg.Logger.Warn("docker engine not reachable yet", "err", err)
	}
	return p, nil
}

// Close releases the engine when the Provider made it. Sandboxes already
// started are not touched.
func (p *Provider) Close() error {
	if p.ownsEngine {
		return p.eng.Close()
	}
	return nil
}

// Ping checks that the engine answers; see [Engine.Ping].
func (p *Provider) Ping(ctx context.Context) error { return p.eng.Ping(ctx) }

// engineInfo returns the engine's info, fetched once.
func (p *Provider) engineInfo(ctx context.Context) (*Info, error) {
	p.infoMu.Lock()
	defer p.infoMu.Unlock()
	if p.info != nil {
		return p.info, nil
	}
	info, err := p.eng.Info(ctx)
	if err != nil {
		return nil, engineErr("info", err)
	}
	p.info = &info
	return p.info, nil
}

// inspectShim checks the shim is an executable file and reports whether it
// is statically linked (no ELF interpreter).
func inspectShim(path string) (bool, error) {
	if !filepath.IsAbs(path) {
		return false, fmt.Errorf("%s: not an absolute path", path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return false, err
	}
	if !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return false, fmt.Errorf("%s: not an executable file", path)
	}
	f, err := elf.Open(path)
	if err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

// checkLimits refuses negative or absurdly small limits.
func checkLimits(op string, mem, cpus, pids, disk int64, timeout time.Duration) error {
	var errs []error
	if mem < 0 || mem > 0 && mem < 16<<20 {
		errs = append(errs, fmt.Errorf("memory %d bytes: want at least 16 MiB", mem))
	}
	if cpus < 0 || cpus > 0 && cpus < 1e7 {
		errs = append(errs, fmt.Errorf("cpus %.3f: want at least 0.01", float64(cpus)/1e9))
	}
	if pids < 0 || pids > 0 && pids < 8 {
		errs = append(errs, fmt.Errorf("pids %d: want at least 8", pids))
	}
	if disk < 0 || disk > 0 && disk < 1<<20 {
		errs = append(errs, fmt.Errorf("disk %d bytes: want at least 1 MiB", disk))
	}
	if timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %s: must not be negative", timeout))
	}
	if len(errs) > 0 {
		return sbErr(sandbox.ErrInvalid, op, fmt.Errorf("invalid limits: %w", errors.Join(errs...)))
	}
	return nil
}

// Check is what every task of this engine needs: the engine answers and
// image (the default image when empty) is there. The error is a
// [sandbox.Error] of kind [sandbox.ErrUnavailable] or
// [sandbox.ErrImageMissing].
func (p *Provider) Check(ctx context.Context, image string) error {
	if err := p.Ping(ctx); err != nil {
		return err
	}
	if image == "" {
		image = p.cfg.DefaultImage
	}
	_, ok, err := p.InspectImage(ctx, image)
	switch {
	case err != nil:
		return err
	case !ok:
		return sbErr(sandbox.ErrImageMissing, "check", fmt.Errorf("image %s not found; run `wrench image build`", image))
	}
	return nil
}
