// Package environment prepares a task's sandbox on its repository's
// environment: the base image, extra Debian packages and setup commands of
// the repository's `.wrench.yaml` (within the server policy), run once and
// kept as a snapshot keyed by content, so later tasks start with their
// dependencies installed and the tree checked out.
//
// # Keys
//
// An environment's key hashes everything that decides what setup produces:
// the base image's content id, the packages, the setup commands, their user
// and environment, the egress hosts and secret names setup may use, and the
// contents (blob ids) of the repository's manifests and lockfiles (go.mod,
// go.sum, requirements*.txt, pyproject.toml, package.json and its
// lockfiles, Cargo.lock, … — see Manifests — plus the configuration's own
// list). A task whose key has a snapshot starts from it and skips setup
// (a hit); a changed lockfile is a new key, so setup runs and a new snapshot
// is saved (a miss).
//
// # Snapshots
//
// A snapshot is a local image of the sandbox after setup: the toolchain,
// dependencies and warmed caches in the home directory, and the workspace
// (working tree and private state repository) at the commit it was built
// from. A hit starts a sandbox from it, sends the objects of the task's
// commit that the snapshot lacks, and moves the tree there (package
// workspace: Switch); the host never writes the tree. Before a snapshot is
// saved, tracked files setup changed are put back (Seal), the untracked
// paths it made are recorded as the environment's own (never in a patch),
// and every value of a secret setup was given is scrubbed from the files it
// changed; secrets reach setup commands only as per-command environment
// variables, never the sandbox's configuration, so no image layer, config
// or history holds them.
//
// # Store
//
// Snapshots are local images named wrench-env:<deployment>-<key prefix>
// with labels, so deployments sharing an engine keep their own; an index in
// the data dir records when each was last used, and Prune removes
// the least recently used beyond a size budget (and those older than an
// age). Builds of one key take turns through a lock file, so five tasks on
// the same repository run setup once.
package environment
