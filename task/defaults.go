package task

import "time"

// The built-in limits of a task, in one place. policy.Default (the
// server's policy without a file) reads them, and so do the agent (a run
// that names none) and the worker (before the policy is read);
// docs/decisions.md lists them.
const (
	// DefaultMaxTurns is the turn limit of a task that sets none.
	DefaultMaxTurns = 50
	// MaxTurnsHardCap bounds every run: an explicit max_turns, and a run
	// with no turn limit (-1).
	MaxTurnsHardCap = 500
	// MaxTimeout bounds a task's wall-clock limit, whatever it asks for.
	MaxTimeout = 24 * time.Hour
	// DefaultTimeout is a task's wall-clock limit.
	DefaultTimeout = 30 * time.Minute
	// DefaultSetupTimeout bounds an environment's setup.
	DefaultSetupTimeout = 15 * time.Minute
	// DefaultTestTimeout bounds one run of the test command.
	DefaultTestTimeout = 10 * time.Minute
)
