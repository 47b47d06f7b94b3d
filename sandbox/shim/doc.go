// Package shim is the helper that runs inside a sandbox and serves exec and
// file operations to the host over one long-lived byte stream, so a tool
// call costs one round trip on an open stream instead of a `docker exec`.
//
// The server side is [Serve]: the container's main process (the wrench
// binary's hidden `__shim` subcommand) reads requests from its stdin and
// writes responses to its stdout. The host side is [Client], which the
// Docker backend connects to the container's attached stdin and stdout.
//
// # Protocol
//
// Both directions carry frames: a 4-byte big-endian length followed by that
// many bytes of JSON. Byte payloads (file contents, command output, stdin)
// are JSON []byte fields, so they travel base64-encoded and arrive exactly,
// whatever their encoding. The first frame the server sends is a [Response]
// with ID 0 and Hello set; a client treats it as "ready". Every later
// request carries a client-chosen non-zero ID that its response echoes, so
// several calls may be in flight at once: the server handles each request
// in its own goroutine. A request with Op "cancel" and Target set cancels
// the request with that ID (an exec's process group is killed); it gets no
// response of its own.
//
// When the input stream ends the server cancels everything in flight,
// waits for it and returns, so closing the stream stops the sandbox.
//
// # Process limit
//
// The shim shares the sandbox's pids limit with the commands it runs; a Go
// program that cannot create an OS thread aborts. So [Serve] first makes
// the runtime create a pool of idle OS threads (Options.ReserveThreads),
// and, while commands run, samples the sandbox's pids cgroup: when the
// limit stays reached (forks refused, or as many tasks as allowed) for
// Options.PidsSustain, the running commands' process groups are killed and
// each result ends with a note saying so (exit 137). A command that cannot
// even start for lack of processes is a result too (exit 126, a note), not
// an error. A per-command RLIMIT_NPROC is not used: the kernel counts it per
// user across the host, and every sandbox runs as the same user.
//
// # Egress
//
// With Options.EgressListen and Options.EgressSocket set, Serve also runs a
// [Forwarder]: a TCP listener on a loopback address inside the sandbox
// (where HTTP_PROXY points) whose connections are handed to the egress
// proxy through its unix socket, which the host bind-mounts into the
// sandbox: the accepted socket itself is passed (or, where it cannot be,
// its bytes relayed). The sandbox needs no network interface for it. The
// forwarder adds nothing to the bytes; when no proxy serves the socket it
// answers 403 saying so.
//
// # Paths
//
// File operations take paths relative to the workspace (absolute paths
// under it are accepted) and are resolved with [os.Root], so neither ".."
// nor a symbolic link can reach outside the workspace.
package shim
