// Package sandbox defines what Wrench needs from an isolated place to run a
// task's commands: start one from a Spec, exec commands and touch files
// inside it, and remove it. The Docker backend lives in sandbox/docker.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"
)

// Provider starts sandboxes.
type Provider interface {
	// Start creates and starts a sandbox and returns when it is ready to
	// exec. On error nothing is left behind.
	Start(ctx context.Context, spec Spec) (Sandbox, error)
}

// Sandbox is one running, isolated environment with the task's workspace at
// WorkDir. Paths given to the file methods are relative to WorkDir (absolute
// paths under it are accepted); anything resolving outside is refused.
type Sandbox interface {
	// ID is the backend's identifier (the container id).
	ID() string
	Exec(ctx context.Context, req ExecRequest) (ExecResult, error)
	ReadFile(ctx context.Context, path string) ([]byte, error)
	WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error
	Remove(ctx context.Context, path string) error
	Stat(ctx context.Context, path string) (FileInfo, error)
	ListDir(ctx context.Context, path string) ([]FileInfo, error)
	Glob(ctx context.Context, pattern, dir string) ([]string, error)
	Grep(ctx context.Context, req GrepRequest) ([]GrepMatch, error)
	// Close stops and removes the sandbox. It is safe to call more than once
	// and uses its own timeout when ctx is already done.
	Close(ctx context.Context) error
}

// WorkDir is where the workspace is mounted inside every sandbox.
const WorkDir = "/workspace"

// Spec describes a sandbox to start. Zero values take the backend's
// hardened defaults.
type Spec struct {
	// Image is the image to run; empty means the default image.
	Image string
	// WorkspaceDir is the host directory mounted read-write at WorkDir.
	WorkspaceDir string
	// TaskID labels the sandbox so the reaper can tell whose it is.
	TaskID string
	// Network is "none" (default) or "bridge".
	Network string
	// MemoryBytes, NanoCPUs and Pids are resource limits.
	MemoryBytes int64
	NanoCPUs    int64
	Pids        int64
	// DiskBytes limits what the sandbox may write (tmpfs sizes and, where
	// supported, the workspace).
	DiskBytes int64
	// Timeout is the sandbox's wall-clock lifetime; the backend kills it
	// after that.
	Timeout time.Duration
	// Env is the environment of commands run inside. The host environment
	// is never passed through.
	Env map[string]string
	// Runtime selects an OCI runtime (e.g. "runsc"); empty is the default.
	Runtime string
}

// ExecRequest is one command to run with bash -c.
type ExecRequest struct {
	Command string
	// Dir is relative to WorkDir; empty means WorkDir.
	Dir string
	// Timeout kills the whole process group; 0 means the backend default.
	Timeout time.Duration
	// MaxOutput caps the output kept (head and tail); 0 means the default.
	MaxOutput int
	// Stdin is fed to the command, when set.
	Stdin []byte
}

// ExecResult is what a command did; a non-zero exit is not an error.
type ExecResult struct {
	ExitCode int
	// Output is stdout and stderr interleaved, head and tail kept.
	Output []byte
	// Dropped counts bytes cut from the middle of Output.
	Dropped  int64
	TimedOut bool
	Duration time.Duration
}

// FileInfo describes one file or directory inside a sandbox.
type FileInfo struct {
	Path    string
	Size    int64
	Mode    fs.FileMode
	IsDir   bool
	ModTime time.Time
}

// GrepRequest is one regular-expression search.
type GrepRequest struct {
	Pattern    string
	Path       string
	Include    string
	MaxMatches int
}

// GrepMatch is one matching line.
type GrepMatch struct {
	Path string
	Line int
	Text string
}

// ErrorKind classifies sandbox failures so callers can decide to retry,
// reject the task or report.
type ErrorKind string

// The classes of sandbox failure.
const (
	// ErrUnavailable: the engine cannot be reached, or refuses the
	// deployment's configuration (the message says what to fix); the task
	// is not at fault; retry later.
	ErrUnavailable ErrorKind = "unavailable"
	// ErrImageMissing: the image is not present; run `wrench image build`.
	ErrImageMissing ErrorKind = "image_missing"
	// ErrInvalid: the spec is wrong (bad limits); the task is at fault.
	ErrInvalid ErrorKind = "invalid"
	// ErrLimit: the sandbox hit a limit (disk quota, lifetime).
	ErrLimit ErrorKind = "limit"
	// ErrGone: the sandbox died or was removed under us.
	ErrGone ErrorKind = "gone"
)

// Error is a typed sandbox failure.
type Error struct {
	Kind ErrorKind
	Op   string
	Err  error
}

func (e *Error) Error() string { return fmt.Sprintf("sandbox %s: %s: %v", e.Op, e.Kind, e.Err) }

func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the ErrorKind of err, or "" when err is not a sandbox error.
func KindOf(err error) ErrorKind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}

// Labels put on every container and workspace Wrench creates, so the reaper
// can find what a crashed process left behind.
const (
	LabelManaged    = "dev.wrench.managed"    // "true"
	LabelDeployment = "dev.wrench.deployment" // deployment name
	LabelTask       = "dev.wrench.task"       // task id
	LabelCreated    = "dev.wrench.created"    // RFC 3339 creation time
	LabelOwnerPID   = "dev.wrench.owner-pid"  // pid of the creating process
	LabelOwnerHost  = "dev.wrench.owner-host" // host name of the creating process
)
