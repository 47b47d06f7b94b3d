package egress

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

// Sessions opens one Session per sandbox, each in a fresh directory under
// Dir, which the sandbox backend then mounts. It is what the environment
// builder asks for egress (environment.Egress).
type Sessions struct {
	// Dir holds the sessions' directories (created when missing). Keep it
	// short: a socket path is at most 107 bytes.
	Dir string
	// Caps are the per-session limits (zero: the defaults).
	Caps SessionConfig
	// CABundle, when set, is written into every session's directory as
	// sandbox.EgressCAName, and sandboxes' TLS clients trust it: the
	// complete trust store for an egress path that re-signs TLS.
	CABundle []byte
	Logger   *slog.Logger

	mu   sync.Mutex
	open map[string]*opened // by directory
}

// opened is a session Sessions opened and its tally.
type opened struct {
	sess *Session
	sum  *Summary
}

// Open starts a session for taskID's sandbox in phase with its allowlist.
// Every record becomes an event on events (may be nil); done closes the
// session, removes its directory and returns the tally by host.
func (s *Sessions) Open(ctx context.Context, taskID, phase string, allow []string, events func(task.Event)) (string, func() []task.EgressSummary, error) {
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return "", nil, fmt.Errorf("egress: %w", err)
	}
	var b [6]byte
	rand.Read(b[:])
	dir := filepath.Join(s.Dir, hex.EncodeToString(b[:]))
	sum := new(Summary)
	cfg := s.Caps
	cfg.Dir, cfg.TaskID, cfg.Phase, cfg.Allow, cfg.Logger = dir, taskID, phase, allow, s.Logger
	cfg.Audit = func(r Record) {
		sum.Add(r)
		if events != nil {
			events(r.Event())
		}
	}
	sess, err := Open(ctx, cfg)
	if err != nil {
		return "", nil, err
	}
	if len(s.CABundle) > 0 {
		if err := os.WriteFile(filepath.Join(dir, sandbox.EgressCAName), s.CABundle, 0o644); err != nil {
			sess.Close()
			return "", nil, fmt.Errorf("egress: CA bundle: %w", err)
		}
	}
	s.mu.Lock()
	if s.open == nil {
		s.open = map[string]*opened{}
	}
	s.open[dir] = &opened{sess: sess, sum: sum}
	s.mu.Unlock()
	return dir, func() []task.EgressSummary {
		s.mu.Lock()
		delete(s.open, dir)
		s.mu.Unlock()
		sess.Close()
		return sum.Hosts()
	}, nil
}

// Assign hands the session in dir (a warm sandbox's) to taskID with its
// allowlist; its records become events on events from now on.
func (s *Sessions) Assign(dir, taskID string, allow []string, events func(task.Event)) error {
	s.mu.Lock()
	o := s.open[dir]
	s.mu.Unlock()
	if o == nil {
		return fmt.Errorf("egress: no session in %s", dir)
	}
	o.sess.Assign(taskID, allow, func(r Record) {
		o.sum.Add(r)
		if events != nil {
			events(r.Event())
		}
	})
	return nil
}
