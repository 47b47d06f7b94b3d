// Package queue is Wrench's NATS JetStream layer: the work queue tasks travel
// on, the state store that records each task's state machine and result, the
// artifact store, the event stream that feeds `wrench watch` and the SSE
// endpoint, and the embedded nats-server that `wrench serve` runs.
//
// Layout (see ARCHITECTURE.md, "NATS"):
//
//   - stream WRENCH_TASKS: work-queue retention, subjects wrench.tasks.<id>,
//     a duplicate window keyed on Nats-Msg-Id = task id, and the durable pull
//     consumer "wrench-workers" that dispatchers share;
//   - KV bucket WRENCH_STATE: key task.<id> holds the task's [task.Status]
//     (state, attempt, worker, timestamps, result); key cancel.<id> is a
//     cancellation request for a running task;
//   - object store WRENCH_ARTIFACTS: "<id>/<artifact>" (patch, trajectory,
//     logs), kept for every final state;
//   - stream WRENCH_EVENTS: wrench.events.<id>, age-limited;
//   - stream WRENCH_DEADLETTER: wrench.deadletter.<id> (tasks whose
//     deliveries ran out) and the captured max-deliveries advisories of the
//     task consumer.
//
// Every state change goes through compare-and-set on the task's KV revision,
// so two workers can never both write a final result: a task's effect happens
// exactly once even when its message is delivered more than once.
package queue
