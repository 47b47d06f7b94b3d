// Package docker implements [sandbox.Provider] on the Docker Engine API
// (github.com/docker/docker/client, API version negotiated, so engines from
// 20.10 (API 1.41) on work; the calls and fields used are unchanged up to
// Engine 28 (API 1.51), where a read-only bind mount is made recursively
// read-only and more configuration errors surface at create instead of
// start, both of which this package expects).
//
// The package is the only one in Wrench that imports the Docker SDK. Its
// [Engine] ([FromEnv], the one engine client a process makes) serves the
// parts of Wrench that manage the engine rather than run sandboxes in it
// (the image build, the doctor, the reaper) in the sandbox vocabulary's
// types ([sandbox.Image], [sandbox.Container]) and plain structs; a
// [Provider] runs on one.
//
// Every sandbox is one container whose main process is the shim (the
// wrench binary's hidden `__shim` subcommand, bind-mounted read-only at
// /.wrench/wrench) under the engine's init. The backend attaches to the
// container's stdin and stdout before starting it, so "ready" is the shim's
// hello frame and every tool call is one round trip on that open stream
// (see package shim); no `docker exec` is involved.
//
// # Hardening
//
// Containers run as a non-root user (1000:1000 by default) with all
// capabilities dropped, no-new-privileges, tmpfs /tmp mounted exec
// (Docker's default noexec breaks `go test`) and sized by the disk limit,
// no network unless the spec asks for "bridge", memory (without swap), CPU
// and process limits, an environment made only of the spec's variables
// (never the host's), no Docker socket, container logging off (stdout is
// the protocol), and a wall-clock lifetime after which the container is
// killed. With Spec.WritableRoot (every task's sandbox, see package
// environment) the root file system is writable and the workspace and the
// home directory live in the container's own layer, system files staying
// root's; without it the root file system is read-only, home is a sized
// tmpfs, and the workspace is Spec.WorkspaceDir bind-mounted read-write at
// /workspace (or a sized tmpfs). Spec.Root runs the shim as root with only
// the capabilities installing packages needs (setupCaps). The optional OCI
// runtime (e.g. runsc) must be registered with the engine.
//
// # Egress
//
// A spec with EgressDir set gets that host directory mounted read-only at
// /.wrench/run, the shim started with -egress-socket and -egress-listen
// (so connections to 127.0.0.1:3128 inside are handed to the egress proxy
// through its unix socket there, see packages shim and egress); the shim
// gives commands HTTP_PROXY, HTTPS_PROXY (both cases) and NO_PROXY, which
// are not part of the container's configuration (so a snapshot committed
// from it does not carry them). The network mode is unchanged:
// with "none" the proxy is the only way out.
//
// A fork bomb does not take the sandbox down: the shim keeps OS threads in
// reserve and kills the commands' process groups when the pids limit
// stays reached (see package shim), so the call returns a failed result.
//
// Neither the writable layer nor a bind-mounted workspace has an engine
// quota, so a supervisor measures what the sandbox wrote every
// Config.WatchInterval (2 s): the writable layer's upper directory walked
// on the host when this process can read it, else the engine's size of the
// layer (one such request at a time per Provider: on fuse-overlayfs it
// walks the whole image), or the shim's walk of a bind-mounted workspace. Past the disk limit the
// container is killed and every later call fails with a [sandbox.Error]
// of kind [sandbox.ErrLimit] saying so. Between two measurements, the
// shim's RLIMIT_FSIZE keeps any one file within the limit.
//
// # Errors
//
// Start returns [sandbox.Error]s: ErrInvalid only for what the task can
// get wrong (limits, network, image name, environment names),
// ErrImageMissing naming the image and `wrench image build`, ErrUnavailable
// when the engine cannot be reached or refuses the deployment's
// configuration (a bind-mount source missing on the engine's host, a
// runtime it does not have): the message names the problem, and the task
// is retried rather than rejected. Calls on a sandbox that died return
// ErrGone (or ErrLimit when a limit killed it); errors of an operation
// itself (a missing file, a path outside the workspace) are returned as the
// shim reports them and match the io/fs sentinels.
package docker
