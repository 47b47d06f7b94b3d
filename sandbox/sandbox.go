// Package sandbox is the vocabulary for where a task's commands run: the
// operations on a workspace ([Env]: exec, files, search) with their request
// and result types, the glob and grep semantics every backend shares, and
// what a backend must offer to start one from a Spec and remove it
// ([Provider], [Sandbox]). It imports only the standard library; the Docker
// backend lives in sandbox/docker, the in-container helper that serves
// these operations in sandbox/shim.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Provider starts sandboxes.
type Provider interface {
	// Start creates and starts a sandbox and returns when it is ready to
	// exec. On error nothing is left behind.
	Start(ctx context.Context, spec Spec) (Sandbox, error)
}

// Sandbox is one running, isolated environment with the task's workspace at
// WorkDir: an [Env] that can be named and removed (the Env's methods and
// two more: a backend implements all of them; consumers take the Env or
// one of its parts).
type Sandbox interface {
	Env
	// ID is the backend's identifier (the container id).
	ID() string
	// Close stops and removes the sandbox. It is safe to call more than once
	// and uses its own timeout when ctx is already done.
	Close(ctx context.Context) error
}

// WorkDir is where the workspace is mounted inside every sandbox.
const WorkDir = "/workspace"

// Spec describes a sandbox to start. Zero values take the backend's
// hardened defaults.
type Spec struct {
	// Image is the image to run; empty means the default image.
	Image string
	// WorkspaceDir is the host directory mounted read-write at WorkDir.
	WorkspaceDir string
	// TaskID labels the sandbox so the reaper can tell whose it is.
	TaskID string
	// Network is "none" (default) or "bridge".
	Network string
	// MemoryBytes, NanoCPUs and Pids are resource limits.
	MemoryBytes int64
	NanoCPUs    int64
	Pids        int64
	// DiskBytes limits what the sandbox may write (tmpfs sizes and, where
	// supported, the workspace).
	DiskBytes int64
	// Timeout is the sandbox's wall-clock lifetime; the backend kills it
	// after that.
	Timeout time.Duration
	// Env is the environment of commands run inside. The host environment
	// is never passed through.
	Env map[string]string
	// Runtime selects an OCI runtime (e.g. "runsc"); empty is the default.
	Runtime string
	// WritableRoot gives the sandbox a writable root file system whose
	// changes stay in the sandbox's own copy-on-write layer: the workspace
	// lives there (from Tree, or from an environment image that holds it),
	// and so do the caches setup fills in the home directory. System files
	// stay the root user's, so commands, which run unprivileged, cannot
	// change them. Without it the root file system is read-only and the
	// workspace is WorkspaceDir or an empty tmpfs.
	WritableRoot bool
	// Root runs the in-sandbox helper as root with the few capabilities
	// installing system packages needs (an environment's setup only;
	// needs WritableRoot). Commands still run as the sandbox user unless
	// an ExecRequest asks for root.
	Root bool
	// Tree is a tar stream extracted at "/" before the sandbox starts (the
	// layout of workspace.Export); it needs WritableRoot.
	Tree io.Reader
	// Labels are extra labels on the sandbox.
	Labels map[string]string
	// EgressDir is a host directory that holds (or will hold) the egress
	// proxy's socket, EgressSocketName (see package egress). When set, the
	// backend mounts it read-only at EgressRunDir, the shim forwards
	// EgressListen inside the sandbox to the socket, and commands get
	// ProxyEnv (from the shim, not the container's configuration). The sandbox keeps its network mode: with "none" the proxy
	// is the only way out.
	EgressDir string
}

// Where the egress proxy is reached inside a sandbox (see Spec.EgressDir).
const (
	// EgressRunDir is where Spec.EgressDir is mounted.
	EgressRunDir = "/.wrench/run"
	// EgressSocketName is the proxy's unix socket in that directory.
	EgressSocketName = "egress.sock"
	// EgressSocket is the socket's path inside the sandbox.
	EgressSocket = EgressRunDir + "/" + EgressSocketName
	// EgressListen is the loopback address inside the sandbox where the
	// shim accepts proxy clients and splices them to EgressSocket.
	EgressListen = "127.0.0.1:3128"
)

// The hand-over on the egress socket: the shim sends HandOverByte with the
// accepted client's socket attached (SCM_RIGHTS), and the proxy answers
// HandOverAck when it took the socket (it then serves the client on it
// directly) or HandOverNack when it did not (the shim then relays the
// client's bytes over the same unix connection). Any other first byte
// starts a plain HTTP proxy client.
const (
	HandOverByte = 0x00
	HandOverAck  = 0x01
	HandOverNack = 0x02
)

// EgressCAFile is where a sandbox finds the CA certificates its TLS
// clients must trust when the egress path re-signs TLS (a corporate or
// sandboxing proxy in front of the worker): written into Spec.EgressDir as
// EgressCAName when the worker is given one.
const (
	EgressCAName = "ca.pem"
	EgressCAFile = EgressRunDir + "/" + EgressCAName
)

// CAEnv points the usual TLS clients (Go, OpenSSL and curl, git, Python's
// requests and pip, Node) at EgressCAFile.
func CAEnv() map[string]string {
	return map[string]string{
		"SSL_CERT_FILE": EgressCAFile, "CURL_CA_BUNDLE": EgressCAFile, "GIT_SSL_CAINFO": EgressCAFile,
		"REQUESTS_CA_BUNDLE": EgressCAFile, "PIP_CERT": EgressCAFile, "NODE_EXTRA_CA_CERTS": EgressCAFile,
	}
}

// ProxyEnv returns the environment that points HTTP clients inside a
// sandbox at the egress proxy listening on listen (EgressListen): both
// spellings of each variable, since tools read one or the other, with
// loopback exempt.
func ProxyEnv(listen string) map[string]string {
	u := "http://" + listen
	return map[string]string{
		"HTTP_PROXY": u, "HTTPS_PROXY": u, "http_proxy": u, "https_proxy": u,
		"NO_PROXY": "localhost,127.0.0.1", "no_proxy": "localhost,127.0.0.1",
	}
}

// ErrorKind classifies sandbox failures so callers can decide to retry,
// reject the task or report.
type ErrorKind string

// The classes of sandbox failure.
const (
	// ErrUnavailable: the engine cannot be reached, or refuses the
	// deployment's configuration (the message says what to fix); the task
	// is not at fault; retry later.
	ErrUnavailable ErrorKind = "unavailable"
	// ErrImageMissing: the image is not present; run `wrench image build`.
	ErrImageMissing ErrorKind = "image_missing"
	// ErrInvalid: the spec is wrong (bad limits); the task is at fault.
	ErrInvalid ErrorKind = "invalid"
	// ErrLimit: the sandbox hit a limit (disk quota, lifetime).
	ErrLimit ErrorKind = "limit"
	// ErrGone: the sandbox died or was removed under us.
	ErrGone ErrorKind = "gone"
)

// Error is a typed sandbox failure.
type Error struct {
	Kind ErrorKind
	Op   string
	Err  error
}

func (e *Error) Error() string { return fmt.Sprintf("sandbox %s: %s: %v", e.Op, e.Kind, e.Err) }

func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the ErrorKind of err, or "" when err is not a sandbox error.
func KindOf(err error) ErrorKind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}

// Labels put on every container and workspace Wrench creates, so the reaper
// can find what a crashed process left behind.
const (
	LabelManaged    = "dev.wrench.managed"    // "true"
	LabelDeployment = "dev.wrench.deployment" // deployment name
	LabelTask       = "dev.wrench.task"       // task id
	LabelCreated    = "dev.wrench.created"    // RFC 3339 creation time (with fractional seconds)
	LabelOwnerPID   = "dev.wrench.owner-pid"  // pid of the creating process
	LabelOwnerHost  = "dev.wrench.owner-host" // host name of the creating process
)
