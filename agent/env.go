package agent

import (
	"context"
	"io/fs"
	"time"
)

// Env is where tools act: the task's workspace inside its sandbox. Paths are
// slash-separated and relative to the workspace root; implementations refuse
// paths that resolve outside it and report missing files with an error
// matching fs.ErrNotExist.
type Env interface {
	// Exec runs a shell command (bash -c) in the workspace.
	Exec(ctx context.Context, req ExecRequest) (ExecResult, error)
	ReadFile(ctx context.Context, path string) ([]byte, error)
	// WriteFile writes data, creating parent directories; mode 0 keeps an
	// existing file's mode (0644 for a new file).
	WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error
	// Remove deletes a file (not a directory).
	Remove(ctx context.Context, path string) error
	Stat(ctx context.Context, path string) (FileInfo, error)
	// ListDir lists one directory, sorted by name.
	ListDir(ctx context.Context, path string) ([]FileInfo, error)
	// Glob returns workspace-relative paths matching pattern (with ** for any
	// depth) under dir, sorted, skipping .git.
	Glob(ctx context.Context, pattern, dir string) ([]string, error)
	// Grep searches files under req.Path for a regular expression.
	Grep(ctx context.Context, req GrepRequest) ([]GrepMatch, error)
}

// ExecRequest is one command to run.
type ExecRequest struct {
	Command string
	// Dir is relative to the workspace root; empty means the root.
	Dir string
	// Timeout kills the command's whole process group; 0 means the
	// environment's default.
	Timeout time.Duration
	// MaxOutput caps the returned output in bytes (head and tail kept);
	// 0 means the environment's default.
	MaxOutput int
}

// ExecResult is what a command did. A command that ran and failed is not an
// error: its exit code says so.
type ExecResult struct {
	ExitCode int
	// Output is stdout and stderr interleaved, possibly truncated.
	Output []byte
	// Dropped counts the bytes cut from the middle of Output.
	Dropped  int64
	TimedOut bool
	Duration time.Duration
}

// FileInfo describes one file or directory.
type FileInfo struct {
	Path    string // workspace-relative
	Size    int64
	Mode    fs.FileMode
	IsDir   bool
	ModTime time.Time
}

// GrepRequest is one search.
type GrepRequest struct {
	Pattern string
	// Path is a file or directory; empty means the workspace root.
	Path string
	// Include is a glob on the file name (e.g. "*.go").
	Include string
	// MaxMatches caps the result; 0 means a default.
	MaxMatches int
}

// GrepMatch is one matching line.
type GrepMatch struct {
	Path string
	Line int
	Text string
}

// Checkpointer saves and restores the workspace. The workspace implements it;
// the agent uses it to keep verified states and roll back regressions.
type Checkpointer interface {
	// Checkpoint records the whole tree (tracked, untracked and deleted
	// files) and returns its id.
	Checkpoint(ctx context.Context, message string) (string, error)
	// Rollback restores the tree exactly to a checkpoint.
	Rollback(ctx context.Context, id string) error
	// Diff returns the unified diff from the base to the current tree.
	Diff(ctx context.Context) (string, error)
}
