// Package dispatcher owns the work queue's consumer and the acknowledgement
// lifecycle of every task delivery; it runs tasks through a [Runner] (the
// worker package implements it). It reaches the queue through the small
// interfaces of [Queue] ([NATS] binds them to a queue.Conn), and the mapping
// from how a run ended to the delivery's acknowledgement is one pure
// function (decide), tested as a table.
//
// For each delivery, fetched only when one of Config.Slots is free:
//
//   - undecodable or invalid task: a rejected result, then Term;
//   - task already final (a redelivery after its result was stored): Ack
//     without running;
//   - otherwise the state record is claimed (running, attempt = delivery
//     count, worker id), the Runner runs under a context that a cancellation
//     request, a shutdown past Config.Grace or a takeover by another worker
//     cancels, InProgress heartbeats go out every AckWait/3, and the runner's
//     events are published on wrench.events.<id>;
//   - final report: artifacts stored, final result written with
//     compare-and-set (exactly one per task), result event, Ack;
//   - Report.Retry: state back to queued with the reason, Nak with backoff —
//     or, on the last delivery, a failed result naming the reason, the
//     message to the dead-letter stream, Term;
//   - a worker that died on a task's last delivery: the server's
//     max-deliveries advisory (captured in the dead-letter stream) is handled
//     by whichever dispatcher gets it: dead letter plus failed result.
package dispatcher
