// Package docker implements [sandbox.Provider] on the Docker Engine API
// (github.com/docker/docker/client, API version negotiated, so engines from
// 20.10 (API 1.41) on work; the calls and fields used are unchanged up to
// Engine 28 (API 1.51), where a read-only bind mount is made recursively
// read-only and more configuration errors surface at create instead of
// start, both of which this package expects).
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
// capabilities dropped, no-new-privileges, a read-only root filesystem,
// tmpfs /tmp and home mounted exec (Docker's default noexec breaks `go
// test`) and sized by the disk limit, the workspace bind-mounted read-write
// at /workspace, no network unless the spec asks for "bridge", memory
// (without swap), CPU and process limits, an environment made only of the
// spec's variables (never the host's), no Docker socket, container logging
// off (stdout is the protocol), and a wall-clock lifetime after which the
// container is killed. The optional OCI runtime (e.g. runsc) must be
// registered with the engine.
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
// The workspace has no engine quota (Docker's size options do not apply
// to bind mounts), so a watchdog measures it through the shim every few
// seconds; past the disk limit the container is killed and every later
// call fails with a [sandbox.Error] of kind [sandbox.ErrLimit] saying so.
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
