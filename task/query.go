package task

import "errors"

// ListOptions select and page a listing of tasks. The state store and the
// HTTP API share them.
type ListOptions struct {
	// State keeps only tasks in this state; empty keeps all.
	State State
	// Limit caps the page (DefaultListLimit when zero, at most
	// MaxListLimit).
	Limit int
	// Cursor continues after the page that returned it; empty starts at the
	// newest task.
	Cursor string
}

// Page sizes of a task listing.
const (
	DefaultListLimit = 50
	MaxListLimit     = 1000
)

// ErrNotFound reports an unknown task id (or artifact name). Stores wrap
// it; callers match it with errors.Is.
var ErrNotFound = errors.New("task not found")

// ErrBadCursor reports a [ListOptions.Cursor] the store did not issue.
var ErrBadCursor = errors.New("invalid list cursor")

// ErrNotPaused reports a request to resume a task that is not paused.
var ErrNotPaused = errors.New("task not paused")

// ErrNotQueued reports a submission that was not queued: nothing of it was
// stored, so submitting it again is safe.
var ErrNotQueued = errors.New("task not queued")

// ErrUnconfirmed reports a submission whose queueing the store did not
// confirm: the task may or may not be queued. Submitting it again with the
// same id is safe: a task is queued at most once per id.
var ErrUnconfirmed = errors.New("task submission unconfirmed")

// SubmitError is a failed submission: Kind is [ErrNotQueued] or
// [ErrUnconfirmed], TaskID the id the task had (the store may have chosen
// it), Err the cause.
type SubmitError struct {
	TaskID string
	Kind   error
	Err    error
}

func (e *SubmitError) Error() string {
	return "submit " + e.TaskID + ": " + e.Kind.Error() + ": " + e.Err.Error()
}

// Unwrap returns Kind and Err, so errors.Is matches either.
func (e *SubmitError) Unwrap() []error { return []error{e.Kind, e.Err} }
