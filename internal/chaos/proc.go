package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is one process of the deployment: started from a command line,
// killed, paused, stopped and started again with the same one. Its stderr
// goes to a log file (appended across restarts) and, for the current run,
// to memory, where WaitLine looks for what it printed.
type Proc struct {
	// Name says which process it is in reports ("serve", "w1", "nats-2").
	Name string

	bin     string
	args    []string
	env     []string
	logPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	out    *lockedBuffer
	done   chan struct{}
	err    error
	paused bool
	starts int
}

// newProc describes a process; nothing runs until Start.
func newProc(name, bin, logPath string, env []string, args ...string) *Proc {
	return &Proc{Name: name, bin: bin, args: args, env: env, logPath: logPath}
}

// Start runs the process; it must not be running.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running() {
		return fmt.Errorf("%s is already running", p.Name)
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open the log of %s: %w", p.Name, err)
	}
	p.starts++
	fmt.Fprintf(logf, "=== start %d of %s at %s\n", p.starts, p.Name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	out := &lockedBuffer{}
	cmd.Stdout = logf
	cmd.Stderr = io.MultiWriter(logf, out)
	// The process dies with this one, however this one ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.out, p.done, p.err, p.paused = cmd, out, done, nil, false
	go func() {
		err := cmd.Wait()
		logf.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// running reports whether the process runs; p.mu is held.
func (p *Proc) running() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Running reports whether the process runs (paused counts as running).
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running()
}

// Starts counts the times the process was started.
func (p *Proc) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// WaitLine waits until the current run printed a line starting with
// prefix on stderr and returns the rest of that line.
func (p *Proc) WaitLine(ctx context.Context, prefix string) (string, error) {
	p.mu.Lock()
	out, done := p.out, p.done
	p.mu.Unlock()
	if out == nil {
		return "", fmt.Errorf("%s was never started", p.Name)
	}
	for {
		for _, l := range strings.Split(out.String(), "\n") {
			if rest, ok := strings.CutPrefix(l, prefix); ok {
				return rest, nil
			}
		}
		select {
		case <-done:
			return "", fmt.Errorf("%s exited before printing %q:\n%s", p.Name, prefix, tail(out.String(), 2048))
		case <-ctx.Done():
			return "", fmt.Errorf("%s never printed %q: %w", p.Name, prefix, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Kill sends SIGKILL and waits for the exit. It reports whether the
// process was running.
func (p *Proc) Kill() bool {
	p.mu.Lock()
	if !p.running() {
		p.mu.Unlock()
		return false
	}
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
	return true
}

// Pause sends SIGSTOP; it reports whether the process was running and not
// paused already.
func (p *Proc) Pause() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running() || p.paused {
		return false
	}
	p.paused = true
	return p.cmd.Process.Signal(syscall.SIGSTOP) == nil
}

// Resume sends SIGCONT to a paused process.
func (p *Proc) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running() && p.paused {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
	}
	p.paused = false
}

// Stop sends SIGTERM (SIGCONT first, if paused) and waits up to timeout
// for the exit, then kills it. A process that was not running is no error.
func (p *Proc) Stop(timeout time.Duration) error {
	p.mu.Lock()
	if !p.running() {
		p.mu.Unlock()
		return nil
	}
	cmd, done := p.cmd, p.done
	if p.paused {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		p.paused = false
	}
	p.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		return fmt.Errorf("%s did not stop within %s of SIGTERM", p.Name, timeout)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return fmt.Errorf("%s exited on SIGTERM: %w", p.Name, p.err)
	}
	return nil
}

// Tail returns the end of what the current run printed on stderr.
func (p *Proc) Tail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.out == nil {
		return ""
	}
	return tail(p.out.String(), n)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// lockedBuffer is a bytes.Buffer safe for one writer and many readers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
