package docker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/shim"
)

// Sandbox is one running container with the shim as its main process. It
// is safe for concurrent use; calls are multiplexed on one attached stream.
type Sandbox struct {
	p      *Provider
	id     string
	spec   sandbox.Spec
	client *shim.Client
	stderr *tailBuffer

	mu       sync.Mutex
	env      map[string]string
	failure  error // why the sandbox stopped (limit hit, died); sticky
	lifetime time.Duration
	started  time.Time

	// upper is the layer directory the disk limit is measured on ("" not
	// looked up yet, "-" measured by the engine); only the supervisor
	// uses it. hostMeasures counts the measurements made there.
	upper        string
	hostMeasures atomic.Int64

	poke     chan struct{} // lifetime changed
	stop     context.CancelFunc
	wg       sync.WaitGroup
	closing  sync.Once
	closeErr error
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

func newSandbox(p *Provider, id string, spec sandbox.Spec) *Sandbox {
	return &Sandbox{
		p:        p,
		id:       id,
		spec:     spec,
		stderr:   &tailBuffer{headMax: 1 << 10, max: 4 << 10},
		env:      commandEnv(spec, spec.Env),
		lifetime: spec.Timeout,
		started:  time.Now(),
		poke:     make(chan struct{}, 1),
	}
}

// commandEnv is the per-command environment: env, and the CA variables
// when the sandbox's egress directory holds a CA bundle. They are never part
// of the container's configuration, so a snapshot of it does not point at
// a file another sandbox may lack.
func commandEnv(spec sandbox.Spec, env map[string]string) map[string]string {
	out := maps.Clone(env)
	if spec.EgressDir == "" {
		return out
	}
	if _, err := os.Stat(filepath.Join(spec.EgressDir, sandbox.EgressCAName)); err != nil {
		return out
	}
	if out == nil {
		out = map[string]string{}
	}
	for k, v := range sandbox.CAEnv() {
		if _, set := out[k]; !set {
			out[k] = v
		}
	}
	return out
}

// ID is the container id.
func (s *Sandbox) ID() string { return s.id }

// Spec is the spec the sandbox was started with, defaults filled in.
func (s *Sandbox) Spec() sandbox.Spec { return s.spec }

// Adopt hands a sandbox started ahead of time (a warm pool's) to a task:
// commands get spec.Env (instead of the start spec's), the lifetime
// restarts from now with spec.Timeout (0: the provider's default), and the
// shim is checked to be alive. Image, limits and network cannot change.
func (s *Sandbox) Adopt(ctx context.Context, spec sandbox.Spec) error {
	if err := s.usable(); err != nil {
		return err
	}
	for k := range spec.Env {
		if k == "" {
			return invalid("adopt", "empty environment variable name")
		}
	}
	lifetime := spec.Timeout
	if lifetime <= 0 {
		lifetime = s.p.cfg.Timeout
	}
	s.mu.Lock()
	s.env = commandEnv(s.spec, spec.Env)
	s.lifetime = lifetime
	s.started = time.Now()
	s.mu.Unlock()
	select {
	case s.poke <- struct{}{}:
	default:
	}
	return s.wrap("adopt", s.client.Ping(ctx))
}

// Exec runs req.Command with bash -c (sh when the image has no bash) in
// the workspace. A command that fails or times out is a result, not an
// error.
func (s *Sandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if err := s.usable(); err != nil {
		return sandbox.ExecResult{}, err
	}
	if req.Timeout <= 0 {
		req.Timeout = s.p.cfg.ExecTimeout
	}
	if req.MaxOutput <= 0 {
		req.MaxOutput = s.p.cfg.MaxOutput
	}
	s.mu.Lock()
	env := s.env
	s.mu.Unlock()
	if len(req.Env) > 0 {
		env = maps.Clone(env)
		if env == nil {
			env = map[string]string{}
		}
		maps.Copy(env, req.Env)
	}
	switch {
	case req.User == "root" && !s.spec.Root:
		return sandbox.ExecResult{}, invalid("exec", "root commands need a sandbox started with Root")
	case req.User == "root":
		req.User = "0:0"
	case req.User != "":
		return sandbox.ExecResult{}, invalid("exec", "user %q: want root or empty", req.User)
	case s.spec.Root:
		req.User = s.p.cfg.User // the helper is root; commands are not
	}
	res, err := s.client.Exec(ctx, req, env)
	return res, s.wrap("exec", err)
}

// ReadFile reads a workspace file.
func (s *Sandbox) ReadFile(ctx context.Context, path string) ([]byte, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	data, err := s.client.ReadFile(ctx, path)
	return data, s.wrap("read", err)
}

// WriteFile writes a workspace file, creating parent directories; mode 0
// keeps an existing file's mode (0644 for a new file).
func (s *Sandbox) WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error {
	if err := s.usable(); err != nil {
		return err
	}
	return s.wrap("write", s.client.WriteFile(ctx, path, data, mode))
}

// Remove deletes a workspace file (not a directory).
func (s *Sandbox) Remove(ctx context.Context, path string) error {
	if err := s.usable(); err != nil {
		return err
	}
	return s.wrap("remove", s.client.Remove(ctx, path))
}

// Stat describes a workspace file.
func (s *Sandbox) Stat(ctx context.Context, path string) (sandbox.FileInfo, error) {
	if err := s.usable(); err != nil {
		return sandbox.FileInfo{}, err
	}
	fi, err := s.client.Stat(ctx, path)
	return fi, s.wrap("stat", err)
}

// ListDir lists a workspace directory sorted by name.
func (s *Sandbox) ListDir(ctx context.Context, path string) ([]sandbox.FileInfo, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	list, err := s.client.ListDir(ctx, path)
	return list, s.wrap("list", err)
}

// Glob returns workspace-relative paths under dir matching pattern ("**"
// for any depth, "{a,b}" alternatives), sorted, skipping .git.
func (s *Sandbox) Glob(ctx context.Context, pattern, dir string) ([]string, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	paths, err := s.client.Glob(ctx, pattern, dir)
	return paths, s.wrap("glob", err)
}

// Grep searches text files (binary files and .git skipped) for an RE2
// regular expression.
func (s *Sandbox) Grep(ctx context.Context, req sandbox.GrepRequest) ([]sandbox.GrepMatch, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	m, err := s.client.Grep(ctx, req)
	return m, s.wrap("grep", err)
}

// usable returns the sticky failure, if any.
func (s *Sandbox) usable() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failure
}

// fail records why the sandbox stopped; the first reason wins.
func (s *Sandbox) fail(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failure == nil {
		s.failure = err
	}
	return s.failure
}

// wrap turns a broken stream into a typed error saying why; errors of the
// operation itself (missing file, path outside the workspace) pass
// through.
func (s *Sandbox) wrap(op string, err error) error {
	if err == nil || !errors.Is(err, shim.ErrClosed) {
		return err
	}
	if f := s.usable(); f != nil {
		return f
	}
	return s.fail(s.diagnose(op, err))
}

// diagnose inspects a container whose stream ended unexpectedly.
func (s *Sandbox) diagnose(op string, cause error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := s.p.cli.ContainerInspect(ctx, s.id)
	switch {
	case cerrdefs.IsNotFound(err):
		return sbErr(sandbox.ErrGone, op, fmt.Errorf("container %s was removed", shortID(s.id)))
	case err != nil:
		return engineErr(op, fmt.Errorf("%w (inspect: %w)", cause, err))
	case st.State != nil && st.State.OOMKilled:
		return sbErr(sandbox.ErrLimit, op, fmt.Errorf("sandbox ran out of memory (limit %d MiB)", s.spec.MemoryBytes>>20))
	case st.State != nil && !st.State.Running:
		return sbErr(sandbox.ErrGone, op, fmt.Errorf("container %s exited with code %d: %w%s", shortID(s.id), st.State.ExitCode, cause, s.stderrNote()))
	}
	return sbErr(sandbox.ErrGone, op, cause)
}

// stderrNote is the first line of the shim's last words (a Go runtime
// abort names its cause there), for an error message.
func (s *Sandbox) stderrNote() string {
	if line := s.stderr.FirstLine(); line != "" {
		return " (shim stderr: " + line + ")"
	}
	return ""
}

// Close stops and removes the container. It is idempotent and safe to call
// concurrently (every caller gets the first call's result); when ctx is
// already done it uses a fresh 30 s timeout.
func (s *Sandbox) Close(ctx context.Context) error {
	s.closing.Do(func() {
		if s.stop != nil {
			s.stop()
		}
		s.wg.Wait()
		if s.client != nil {
			s.client.Close()
		}
		s.fail(sbErr(sandbox.ErrGone, "call", errors.New("sandbox closed")))
		if ctx.Err() != nil {
			ctx = context.WithoutCancel(ctx)
		}
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		err := s.p.cli.ContainerRemove(ctx, s.id, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
			s.closeErr = engineErr("close", fmt.Errorf("remove container %s: %w", shortID(s.id), err))
		}
	})
	return s.closeErr
}

// kill stops the container now (the sandbox stays until Close removes it).
func (s *Sandbox) kill() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.p.cli.ContainerKill(ctx, s.id, "KILL"); err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
		s.p.cfg.Logger.Warn("kill sandbox", "id", shortID(s.id), "err", err)
	}
	s.client.Close()
}
