// Package task holds Wrench's domain types: the Task a user submits, the
// Result a worker hands back, the State machine a task moves through, the
// Events emitted while it runs, and the validation that decides whether a
// task can run at all.
//
// It imports nothing else from Wrench; every other package may import it.
package task
