// Package chaos is Wrench's published fault suite: it runs a deployment of
// real processes on loopback (NATS, `wrench serve` with no slots, two or
// three `wrench worker`s, all from the built binary), submits tasks over
// small local repositories with the scripted model, injects faults at
// random from a seed while they run, and checks at the end that nothing
// was lost, done twice or leaked.
//
// The faults: SIGKILL of a worker while a task it holds clones, runs its
// agent, verifies or stores its result (each restarted at once); SIGSTOP
// of a worker past the ack wait, then SIGCONT; SIGKILL and restart of a
// NATS node; `docker rm -f` of a running task's container from outside;
// duplicate submissions of a task's id. Which tasks are hit, by what, and
// the pauses between are drawn from Config.Seed, so a seed reproduces a
// run's plan (the timing of real processes still varies).
//
// `make chaos` runs it through tools/chaos; TestChaos runs a short
// version on every change. docs/reliability.md ("Chaos") holds the
// latest results.
package chaos
