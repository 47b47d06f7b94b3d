package workspace

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// Sentinel errors, matched with errors.Is. A [*CloneError] wraps the ones
// that describe why a clone failed.
var (
	// ErrNotFound: the remote repository does not exist (or is hidden from
	// the credentials given).
	ErrNotFound = errors.New("repository not found")
	// ErrNotRepository: a local path or file:// URL is not a git repository.
	ErrNotRepository = errors.New("not a git repository")
	// ErrAuth: the remote refused the credentials.
	ErrAuth = errors.New("authentication failed")
	// ErrRefNotFound: the task's ref is neither a branch nor a tag.
	ErrRefNotFound = errors.New("ref not found")
	// ErrCommitNotFound: the task's commit is not in the repository, or is
	// not a commit.
	ErrCommitNotFound = errors.New("commit not found")
	// ErrEmptyRepository: the repository has no commits to check out.
	ErrEmptyRepository = errors.New("repository is empty")
	// ErrUnsupportedURL: the URL's scheme is not https, file or a local path,
	// or local sources are disabled.
	ErrUnsupportedURL = errors.New("unsupported repository URL")
	// ErrUnknownCheckpoint: Rollback was given an id this workspace did not
	// create.
	ErrUnknownCheckpoint = errors.New("unknown checkpoint")
	// ErrClosed: the workspace was closed.
	ErrClosed = errors.New("workspace closed")
)

// CloneError is why [Manager.Open] could not produce a workspace. Retriable
// says whether trying again later may succeed (network failures, timeouts,
// server errors, local I/O); permanent failures (not found, not a
// repository, bad ref or commit, refused credentials, unsupported URL) will
// fail the same way every time.
type CloneError struct {
	// URL is the repository URL with any credentials removed.
	URL string
	// Op is the step that failed ("resolve ref", "fetch", "checkout", ...).
	Op string
	// Retriable is true when the failure is transient.
	Retriable bool
	// Err is the cause; it wraps one of the package's sentinels when the
	// cause is known.
	Err error
	// secrets are scrubbed from the message (credentials of the URL).
	secrets []string
}

// Error describes the failure, without the URL's credentials.
func (e *CloneError) Error() string {
	return scrub(fmt.Sprintf("clone %s: %s: %v", e.URL, e.Op, e.Err), e.secrets)
}

func (e *CloneError) Unwrap() error { return e.Err }

// Retriable reports whether err is a [*CloneError] marked retriable.
func Retriable(err error) bool {
	var ce *CloneError
	return errors.As(err, &ce) && ce.Retriable
}

// permanent wraps err as a permanent clone failure.
func permanent(src source, op string, err error) error {
	return &CloneError{URL: src.display, Op: op, Retriable: false, Err: err, secrets: src.secrets}
}

// cloneErr classifies err (from go-git, the network or the file system) and
// wraps it as a clone failure. An error that is already a *CloneError is
// returned unchanged.
func cloneErr(src source, op string, err error) error {
	var ce *CloneError
	if errors.As(err, &ce) {
		return err
	}
	kind, retriable := classify(err)
	if kind != nil && !errors.Is(err, kind) {
		err = fmt.Errorf("%w: %w", kind, err)
	}
	return &CloneError{URL: src.display, Op: op, Retriable: retriable, Err: err, secrets: src.secrets}
}

// classify maps a transport or I/O error to a sentinel (nil when none fits)
// and whether it is worth retrying. Unknown errors count as retriable: they
// are most often infrastructure faults, and the dispatcher bounds retries.
func classify(err error) (kind error, retriable bool) {
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrNotRepository), errors.Is(err, ErrAuth),
		errors.Is(err, ErrRefNotFound), errors.Is(err, ErrCommitNotFound),
		errors.Is(err, ErrEmptyRepository), errors.Is(err, ErrUnsupportedURL):
		return nil, false
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return ErrNotFound, false
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed),
		errors.Is(err, transport.ErrInvalidAuthMethod):
		return ErrAuth, false
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return ErrEmptyRepository, false
	case errors.Is(err, context.Canceled):
		return nil, false
	case errors.Is(err, context.DeadlineExceeded):
		return nil, true
	}
	var herr *githttp.Err
	if errors.As(err, &herr) {
		code := herr.StatusCode()
		return nil, code >= 500 || code == 429 || code == 408
	}
	var uerr x509.UnknownAuthorityError
	var herr2 x509.HostnameError
	var cerr *tls.CertificateVerificationError
	if errors.As(err, &uerr) || errors.As(err, &herr2) || errors.As(err, &cerr) {
		return nil, false
	}
	var nerr net.Error
	if errors.As(err, &nerr) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, true
	}
	return nil, true
}
