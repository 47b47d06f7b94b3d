package dispatcher

import (
	"errors"
	"fmt"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// action is how a delivery ends after its run.
type action int

const (
	// discard: another run holds the task; leave the delivery alone.
	discard action = iota
	// finish: store the result, then Ack.
	finish
	// handBack: the worker is stopping; requeue without blaming the task
	// (as a fresh message on its last delivery, so it is not exhausted).
	handBack
	// retry: an infrastructure fault; requeue and Nak after a backoff.
	retry
	// bury: an infrastructure fault on the last delivery; a failed result,
	// then Term with the message copied to the dead letters.
	bury
	// handOver: this worker's own infrastructure is unusable; requeue as a
	// new message, without counting the delivery, for a worker whose
	// infrastructure works (this one stops fetching until it does).
	handOver
	// pause: a spend cap above the task stopped it; record it paused with
	// its work's artifacts, then Ack (it runs again when resumed).
	pause
)

var actionNames = [...]string{"discard", "finish", "hand back", "retry", "bury", "hand over", "pause"}

func (a action) String() string { return actionNames[a] }

// verdict is what to do with a delivery whose run ended.
type verdict struct {
	action action
	// result to store (finish, bury).
	result task.Result
	// reason of a requeue (handBack, retry).
	reason string
	// delay before redelivery (retry).
	delay time.Duration
	// pause of a paused task.
	pause *task.Pause
}

// decide maps how a run ended (its report, the cause its context was
// cancelled with, if any, and local: this worker's own infrastructure
// failing its probe after the run failed) to the delivery's fate; charged
// is the task's delivery count less the deliveries that did not count
// toward its limit. It is pure: the ack mapping in one table.
func decide(rep task.Report, cause error, charged int, cfg Config, local error) verdict {
	switch {
	case errors.Is(cause, errLostLease):
		return verdict{action: discard}
	case cause != nil && rep.Result.Status == task.StateResolved && !rep.Retry:
		// The work was done before the cancellation or shutdown took
		// hold: keep it.
		return verdict{action: finish, result: rep.Result}
	case errors.Is(cause, errShutdown):
		return verdict{action: handBack, reason: "worker shutdown: handed back"}
	case errors.Is(cause, errCancelled):
		res := rep.Result
		res.Status, res.Reason = task.StateCancelled, "cancelled"
		return verdict{action: finish, result: res}
	case rep.Pause != nil:
		return verdict{action: pause, pause: rep.Pause, reason: rep.Result.Reason}
	case local != nil && rep.Result.Fault == task.FaultInfra && rep.Result.Status != task.StateResolved:
		return verdict{action: handOver, reason: "worker fault: " + local.Error()}
	case rep.Retry && charged < cfg.MaxDeliver:
		return verdict{action: retry, reason: "retry: " + orUnknown(rep.Result.Reason), delay: cfg.backoff(charged)}
	case rep.Retry:
		res := rep.Result
		res.Status = task.StateFailed
		res.Reason = fmt.Sprintf("deliveries exhausted (%d): %s", charged, orUnknown(rep.Result.Reason))
		return verdict{action: bury, result: res}
	case !rep.Result.Status.Final():
		res := rep.Result
		res.Status = task.StateFailed
		res.Reason = fmt.Sprintf("runner returned no final state (%q): %s", rep.Result.Status, rep.Result.Reason)
		return verdict{action: finish, result: res}
	default:
		return verdict{action: finish, result: rep.Result}
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown infrastructure fault"
	}
	return s
}
