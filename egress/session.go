package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
)

// The phases a session serves.
const (
	PhaseSetup = "setup"
	PhaseAgent = "agent"
)

// Defaults of [SessionConfig]; one place for each.
const (
	DefaultDialTimeout     = 10 * time.Second
	DefaultIdleTimeout     = 2 * time.Minute
	DefaultMaxConnBytes    = 2 << 30 // 2 GiB: a toolchain or a large package, with room
	DefaultMaxSessionBytes = 8 << 30
	DefaultMaxConns        = 64
	DefaultMaxHeaderBytes  = 64 << 10
)

// SessionConfig configures one [Session]. Zero values take the defaults
// above.
type SessionConfig struct {
	// Dir is the host directory the socket (sandbox.EgressSocketName) is
	// made in, and that the backend mounts into the sandbox. Open creates
	// it when missing (its parent must exist) and Close then removes it; an
	// existing directory is used as it is and left in place, so a sandbox
	// that outlives a session (setup, then the agent phase) keeps its
	// mount and gets the next session's socket in the same place.
	Dir string
	// TaskID and Phase (PhaseSetup or PhaseAgent) label every record and
	// every denial.
	TaskID string
	Phase  string
	// Allow are the host patterns this phase may reach (see
	// policy.MatchHost); empty denies everything.
	Allow []string
	// Audit receives one Record per tunnel or forwarded request when it
	// ends, and per denial at once. It is called from the session's
	// goroutines, possibly concurrently, and never after Close returns.
	Audit func(Record)
	// DialTimeout bounds connecting to a host; IdleTimeout closes a
	// connection on which no byte moved either way for that long.
	DialTimeout time.Duration
	IdleTimeout time.Duration
	// MaxConnBytes caps the bytes (both ways) of one tunnel or one
	// forwarded request, MaxSessionBytes those of the whole session;
	// at the cap the connection is closed and its record says why.
	MaxConnBytes    int64
	MaxSessionBytes int64
	// MaxConns caps concurrent client connections; more get a 503.
	MaxConns int
	// MaxHeaderBytes caps a request's head.
	MaxHeaderBytes int
	// Logger receives the session's debug logs (default slog.Default()).
	// Nothing that passes through is logged.
	Logger *slog.Logger
}

func (c SessionConfig) withDefaults() (SessionConfig, error) {
	if c.Phase != PhaseSetup && c.Phase != PhaseAgent {
		return c, fmt.Errorf("egress: phase %q: want %q or %q", c.Phase, PhaseSetup, PhaseAgent)
	}
	if !filepath.IsAbs(c.Dir) {
		return c, fmt.Errorf("egress: dir %q: not an absolute path", c.Dir)
	}
	// The kernel's limit on a socket path (sun_path) is 108 bytes.
	if n := len(filepath.Join(c.Dir, sandbox.EgressSocketName)); n >= 108 {
		return c, fmt.Errorf("egress: dir %s: the socket path would be %d bytes, the limit is 107", c.Dir, n)
	}
	if c.Audit == nil {
		c.Audit = func(Record) {}
	}
	setDefault(&c.DialTimeout, DefaultDialTimeout)
	setDefault(&c.IdleTimeout, DefaultIdleTimeout)
	setDefault(&c.MaxConnBytes, DefaultMaxConnBytes)
	setDefault(&c.MaxSessionBytes, DefaultMaxSessionBytes)
	setDefault(&c.MaxConns, DefaultMaxConns)
	setDefault(&c.MaxHeaderBytes, DefaultMaxHeaderBytes)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

func setDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Session is one sandbox's egress proxy in one phase. Its methods are safe
// for concurrent use.
type Session struct {
	cfg    SessionConfig
	socket string
	ownDir bool
	ln     net.Listener
	ctx    context.Context // ends with Close: cancels dials
	cancel context.CancelFunc

	used atomic.Int64 // bytes moved in the session, for MaxSessionBytes
	bulk sync.Pool    // of *[]byte, bulkSize: buffers of bulk copies

	mu      sync.Mutex
	closers map[io.Closer]struct{} // open client and host connections
	clients int
	closed  bool
	wg      sync.WaitGroup

	closeOnce sync.Once
	closeErr  error

	// bind is who the session works for now (see Assign).
	bindMu sync.RWMutex
	bind   binding
}

// binding is the task a session audits for and its allowlist.
type binding struct {
	taskID string
	allow  []string
	audit  func(Record)
}

// Assign hands the session to another task (a sandbox started ahead of
// time, for a warm pool, is given to a task): records and denials name
// taskID, the allowlist becomes allow, and records go to audit (nil: the
// session's own Audit). Connections already open keep their verdict.
func (s *Session) Assign(taskID string, allow []string, audit func(Record)) {
	if audit == nil {
		audit = s.cfg.Audit
	}
	s.bindMu.Lock()
	s.bind = binding{taskID: taskID, allow: append([]string(nil), allow...), audit: audit}
	s.bindMu.Unlock()
}

func (s *Session) current() binding {
	s.bindMu.RLock()
	defer s.bindMu.RUnlock()
	return s.bind
}

// Open makes cfg.Dir and the socket in it, and serves the proxy there until
// Close. The directory is searchable and the socket writable by every user
// (the sandbox runs as another user); the proxy itself is the gate. ctx
// bounds only the opening.
func Open(ctx context.Context, cfg SessionConfig) (*Session, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := &Session{cfg: cfg, socket: filepath.Join(cfg.Dir, sandbox.EgressSocketName), closers: map[io.Closer]struct{}{},
		bind: binding{taskID: cfg.TaskID, allow: cfg.Allow, audit: cfg.Audit}}
	if s.ownDir, err = makeDir(cfg.Dir); err != nil {
		return nil, err
	}
	if err := s.listen(); err != nil {
		if s.ownDir {
			os.RemoveAll(cfg.Dir)
		}
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(1)
	go func() { // ends when Close closes the listener
		defer s.wg.Done()
		s.accept()
	}()
	return s, nil
}

// makeDir creates dir (mode 0755, whatever the umask) or checks that it is
// a directory; created reports which.
func makeDir(dir string) (created bool, err error) {
	err = os.Mkdir(dir, 0o755)
	switch {
	case err == nil:
		created = true
	case errors.Is(err, os.ErrExist):
		fi, serr := os.Stat(dir)
		if serr != nil || !fi.IsDir() {
			return false, fmt.Errorf("egress: %s exists and is not a directory", dir)
		}
	default:
		return false, fmt.Errorf("egress: make socket dir: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return created, fmt.Errorf("egress: socket dir: %w", err)
	}
	return created, nil
}

// listen binds the socket, replacing a stale one (left by a crashed
// process) but never a live one.
func (s *Session) listen() error {
	if fi, err := os.Lstat(s.socket); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return fmt.Errorf("egress: %s exists and is not a socket", s.socket)
		}
		if c, err := net.DialTimeout("unix", s.socket, time.Second); err == nil {
			c.Close()
			return fmt.Errorf("egress: %s is already being served by another session", s.socket)
		}
		os.Remove(s.socket)
	}
	ln, err := net.Listen("unix", s.socket)
	if err != nil {
		return fmt.Errorf("egress: listen: %w", err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(true)
	if err := os.Chmod(s.socket, 0o666); err != nil {
		ln.Close()
		return fmt.Errorf("egress: socket mode: %w", err)
	}
	s.ln = ln
	return nil
}

// bulkSize is the buffer of a bulk copy (a download): large enough that
// the proxy's syscalls cost little next to the bytes.
const bulkSize = 256 << 10

func (s *Session) bulkBuf() *[]byte {
	if b, ok := s.bulk.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, bulkSize)
	return &b
}

// Socket is the socket's host path.
func (s *Session) Socket() string { return s.socket }

// Close stops serving, closes every open tunnel and forwarded connection,
// waits for the session's goroutines (so every record has been audited)
// and removes the socket, and the directory when Open made it. It is safe
// to call more than once.
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		s.cancel() // first: connections cut below then say why
		s.mu.Lock()
		s.closed = true
		for c := range s.closers {
			c.Close()
		}
		s.mu.Unlock()
		s.closeErr = s.ln.Close()
		s.wg.Wait()
		if errors.Is(s.closeErr, net.ErrClosed) {
			s.closeErr = nil
		}
		if s.ownDir {
			if err := os.RemoveAll(s.cfg.Dir); err != nil && s.closeErr == nil {
				s.closeErr = fmt.Errorf("egress: remove %s: %w", s.cfg.Dir, err)
			}
		}
	})
	return s.closeErr
}

func (s *Session) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.cfg.Logger.Debug("egress accept", "task_id", s.current().taskID, "err", err)
			time.Sleep(10 * time.Millisecond) // EMFILE and the like: back off
			continue
		}
		over, ok := s.addClient(c)
		if !ok {
			c.Close()
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			client := c
			defer func() { s.removeClient(client) }()
			if over {
				refuseBusy(c, s.cfg.MaxConns)
				return
			}
			adopted := s.adopt(c.(*net.UnixConn))
			if adopted == nil {
				return
			}
			if tc, ok := adopted.(*net.TCPConn); ok { // handed over: the unix connection is done
				if !s.replace(c, tc) {
					return
				}
				client = tc
			}
			newClientConn(s, adopted).serve()
		}()
	}
}

// replace tracks a handed-over client in place of the unix connection
// that brought it, and closes that; false (and nc closed) once the session
// is closed.
func (s *Session) replace(old, nc net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.closers, old)
	old.Close()
	if s.closed {
		nc.Close()
		return false
	}
	s.closers[nc] = struct{}{}
	return true
}

// addClient tracks a client connection; over is true past MaxConns, ok
// false once the session is closed.
func (s *Session) addClient(c net.Conn) (over, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, false
	}
	s.closers[c] = struct{}{}
	s.clients++
	return s.clients > s.cfg.MaxConns, true
}

func (s *Session) removeClient(c net.Conn) {
	s.untrack(c)
	s.mu.Lock()
	s.clients--
	s.mu.Unlock()
}

// track registers a host connection so Close can close it; false (and c
// closed) once the session is closed.
func (s *Session) track(c io.Closer) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return false
	}
	s.closers[c] = struct{}{}
	return true
}

// untrack forgets and closes c.
func (s *Session) untrack(c io.Closer) {
	s.mu.Lock()
	delete(s.closers, c)
	s.mu.Unlock()
	c.Close()
}

// audit fills the session's fields and hands r to the configured Audit.
func (s *Session) audit(r Record) {
	b := s.current()
	r.TaskID, r.Phase = b.taskID, s.cfg.Phase
	b.audit(r)
}
