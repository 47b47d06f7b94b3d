// Package queue is Wrench's NATS JetStream layer, split by role. A [Conn]
// binds the layout and hands out one value per role, each with only the
// methods its users need:
//
//   - [Submissions]: submit a task, cancel one (the API, the webhook);
//   - [Work]: the consumer side: deliveries of the work queue with their
//     acknowledgements ([Delivery]), the queue's lag, and the tasks whose
//     deliveries ran out (the dispatcher);
//   - [States]: each task's state record, claimed for a run through a
//     [Lease] and settled with compare-and-set; cancellation requests;
//     listing (the dispatcher, the API);
//   - [Artifacts]: patch, trajectory and logs of each task;
//   - [Events]: each task's event stream (the dispatcher publishes, the API
//     follows).
//
// Consumers declare the small interfaces they need (package dispatcher's
// Queue, package api's Submitter, States, EventSource and ArtifactSource);
// the nats-server that `wrench serve` embeds is in package natsserver, so
// that a client of the API links neither.
//
// Layout:
//
//   - stream WRENCH_TASKS: work-queue retention, subjects wrench.tasks.<id>
//     (the default tenant's tasks) and wrench.tasks.<tenant>.<id>, a
//     duplicate window keyed on Nats-Msg-Id = task id, and one durable pull
//     consumer per tenant that dispatchers share: "wrench-workers" (filter
//     wrench.tasks.*) and "wrench-workers-<tenant>" (see tenants.go);
//   - KV bucket WRENCH_STATE: key task.<id> holds the task's [task.Status]
//     (state, attempt, worker, timestamps, result); key cancel.<id> is a
//     cancellation request for a running task; bounded by [Retention];
//   - object store WRENCH_ARTIFACTS: "<id>/<artifact>" (patch, trajectory,
//     logs), bounded by [Retention];
//   - stream WRENCH_EVENTS: wrench.events.<id>, age-limited;
//   - stream WRENCH_DEADLETTER: wrench.deadletter.<id> (tasks whose
//     deliveries ran out) and the captured max-deliveries advisories of the
//     task consumers;
//   - KV bucket WRENCH_LIMITS (made on first use): key tenant.<name> or
//     repo.<hash> holds the leases of the runs holding a place under that
//     cluster-wide limit ([Limits]).
//
// Every stream and bucket has Config.Replicas replicas. Every state change
// goes through compare-and-set on the task's KV revision, so two workers can
// never both write a final result: a task's effect happens exactly once even
// when its message is delivered more than once.
package queue
