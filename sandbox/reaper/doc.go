// Package reaper removes what a crashed or killed Wrench process left
// behind: sandbox containers and git workspaces labelled with this
// deployment whose task is no longer running.
//
// A resource is an orphan when its task is not alive (as the caller's
// [Config.Alive] tells) and either its owner process is gone — it was
// created on this host by a pid that no longer runs, or that now belongs
// to a process started after the resource was made — or it is older than
// [Config.MaxAge]. Resources owned by another live process on this host,
// or by a process on another host, are left alone until MaxAge. Resources
// owned by this very process are removed only when Alive says their task
// is over, and only after [Config.Grace], so a task that is starting is
// never raced.
//
// Call [Reaper.Sweep] once at start-up (before taking work), then run
// [Reaper.Run] in the background for the life of the process.
package reaper
