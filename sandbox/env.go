package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"
)

// Env is where a task's commands run and its files live: the workspace
// inside a sandbox. The agent's tools act through it; every backend (the
// Docker sandbox, the in-memory fake agent/memenv) implements it and passes
// the contract suite in internal/sandboxtest.
//
// Paths are slash-separated and relative to the workspace root; absolute
// paths under [WorkDir] are accepted. Implementations refuse paths that
// resolve outside the workspace with an error matching [ErrEscape] (and
// fs.ErrPermission), report missing files with one matching
// fs.ErrNotExist, a directory where a file is needed with [ErrIsDir], and
// a file where a directory is needed with [ErrNotDir].
//
// Env has eight methods because it is the whole of what a backend serves;
// it is composed of three small interfaces, and a consumer that needs less
// (a tool that only reads, a check that only execs) takes one of those.
type Env interface {
	Execer
	Files
	Searcher
}

// Execer runs commands in the workspace.
type Execer interface {
	// Exec runs req.Command with bash -c (sh where there is no bash). A
	// command that ran and failed, or timed out, is a result, not an error.
	Exec(ctx context.Context, req ExecRequest) (ExecResult, error)
}

// Files reads and writes single files and directories.
type Files interface {
	// ReadFile returns a file's contents.
	ReadFile(ctx context.Context, path string) ([]byte, error)
	// WriteFile writes data, creating parent directories; mode 0 keeps an
	// existing file's mode (0644 for a new file), any other mode is applied.
	WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error
	// Remove deletes a file or symbolic link, never a directory.
	Remove(ctx context.Context, path string) error
	// Stat describes a file or directory, following symbolic links that
	// stay inside the workspace.
	Stat(ctx context.Context, path string) (FileInfo, error)
	// ListDir lists one directory's entries, sorted by name.
	ListDir(ctx context.Context, path string) ([]FileInfo, error)
}

// Searcher finds files by name and lines by content.
type Searcher interface {
	// Glob returns the workspace-relative paths of the files and
	// directories under dir matching pattern (see [ParseGlob]), in walk
	// order (see [CompareWalk]), skipping .git.
	Glob(ctx context.Context, pattern, dir string) ([]string, error)
	// Grep searches the text files under req.Path for a regular expression
	// (see [GrepRequest]).
	Grep(ctx context.Context, req GrepRequest) ([]GrepMatch, error)
}

// Checkpointer saves and restores the workspace tree. The workspace
// package implements it; the agent uses it to keep verified states and
// roll back regressions.
type Checkpointer interface {
	// Checkpoint records the whole tree (tracked, untracked and deleted
	// files) and returns its id.
	Checkpoint(ctx context.Context, message string) (string, error)
	// Rollback restores the tree exactly to a checkpoint.
	Rollback(ctx context.Context, id string) error
	// Diff returns the unified diff from the base to the current tree. A
	// patch that leaves out files too large to include comes with an
	// error matching [ErrPartialPatch]; any other error means there is no
	// patch.
	Diff(ctx context.Context) (string, error)
}

// ErrPartialPatch is matched by the error a Diff returns with a valid
// patch that leaves out files too large to include (the error names
// them): the patch holds everything else.
var ErrPartialPatch = errors.New("the patch leaves out files too large to include")

// ExecRequest is one command to run.
type ExecRequest struct {
	Command string
	// Dir is relative to the workspace root; empty means the root. A
	// missing Dir is an error matching fs.ErrNotExist.
	Dir string
	// Timeout kills the command's whole process group; 0 means the
	// backend's default.
	Timeout time.Duration
	// MaxOutput caps the output kept (head and tail) in bytes; 0 means the
	// backend's default.
	MaxOutput int
	// Stdin is fed to the command, when set.
	Stdin []byte
	// Env are extra environment variables for this command only (a
	// setup's secrets, say): they are never part of the sandbox's own
	// configuration, so no snapshot of it keeps them.
	Env map[string]string
	// User is "root" to run as root in a sandbox started with Spec.Root;
	// empty is the sandbox user.
	User string
}

// ExecResult is what a command did. A command that ran and failed is not an
// error: its exit code says so.
type ExecResult struct {
	ExitCode int
	// Output is stdout and stderr interleaved, head and tail kept.
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

// GrepRequest is one regular-expression (RE2) search. Binary files (a NUL
// byte near the start) and .git are skipped; matches come in walk order.
type GrepRequest struct {
	Pattern string
	// Path is a file or directory; empty means the workspace root.
	Path string
	// Include filters files by a glob (see [ParseInclude]): one without
	// "/" is matched against the file name, one with "/" against the path
	// relative to Path. Empty means every file.
	Include string
	// MaxMatches caps the result; 0 means [DefaultMaxMatches].
	MaxMatches int
}

// DefaultMaxMatches is how many matches a Grep returns when the request
// does not say.
const DefaultMaxMatches = 1000

// GrepMatch is one matching line. Text is the line without its line ending
// (clipped when very long, see [MatchLines]).
type GrepMatch struct {
	Path string
	Line int
	Text string
}

// ErrEscape is matched (errors.Is) by errors for paths that resolve outside
// the workspace. Such errors match fs.ErrPermission too.
var ErrEscape error = escapeError{}

type escapeError struct{}

func (escapeError) Error() string { return "path escapes the workspace" }

// Is makes an escape a permission error as well.
func (escapeError) Is(target error) bool { return target == fs.ErrPermission }

// ErrIsDir is matched by errors of operations that need a file but got a
// directory.
var ErrIsDir = errors.New("is a directory")

// ErrNotDir is matched by errors of operations that need a directory but
// got a file; such errors match fs.ErrInvalid too.
var ErrNotDir = fmt.Errorf("not a directory: %w", fs.ErrInvalid)

// Broken reports whether err means the sandbox itself failed — it is gone,
// hit a limit, or its engine cannot be reached — rather than the operation
// (a missing file, a path outside the workspace). Nothing more can run in a
// broken sandbox.
func Broken(err error) bool {
	switch KindOf(err) {
	case ErrGone, ErrLimit, ErrUnavailable:
		return true
	}
	return false
}
