package worker

import (
	"errors"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

// InputError marks a failure caused by the task itself — a repository that
// does not exist, a ref that is not there, an unknown model scheme. The task
// is rejected and not retried. Adapters wrap their packages' errors in it.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// TransientError marks an infrastructure failure that may pass (network
// error on clone, engine restarting); the dispatcher delivers the task again.
type TransientError struct{ Err error }

func (e *TransientError) Error() string { return e.Err.Error() }
func (e *TransientError) Unwrap() error { return e.Err }

func badInput(err error) bool {
	var ie *InputError
	return errors.As(err, &ie) || sandbox.KindOf(err) == sandbox.ErrInvalid
}

func retryable(err error) bool {
	var te *TransientError
	return errors.As(err, &te) || sandbox.KindOf(err) == sandbox.ErrUnavailable
}

// checkInput is what a task must pass before any work starts: the task's
// own rules and the agent's (tool names, protocol, plan). A task that fails
// is rejected, never retried.
func checkInput(t *task.Task) error {
	if err := t.Validate(); err != nil {
		return err
	}
	return agent.CheckTask(t)
}

// rejected is the result of a run the agent refused as unusable input
// (agent.ErrInvalidRun): rejected, not retried, keeping what was learned
// before the agent started.
func rejected(err error, before task.Result) task.Result {
	return task.Result{Status: task.StateRejected, Reason: err.Error(), Fault: task.FaultInput,
		BaseCommit: before.BaseCommit, TestsBefore: before.TestsBefore, Setup: before.Setup}
}
