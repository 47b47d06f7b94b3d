package github

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"
)

// Token is a credential for one repository's REST calls and git traffic.
// It formats as "[redacted]" in every verb and in slog.
type Token struct {
	// Value is sent as "Authorization: Bearer <value>" and as git's basic
	// auth password.
	Value string
	// ExpiresAt is when the token stops working (zero: not known to
	// expire, as for a personal access token).
	ExpiresAt time.Time
	// Permissions are the App permissions the token carries ("contents":
	// "write", …); nil when unknown (a personal access token), and then
	// only GitHub's answers tell what is missing.
	Permissions map[string]string
}

// String hides the token.
func (Token) String() string { return "[redacted]" }

// GoString hides the token from %#v.
func (Token) GoString() string { return "github.Token{[redacted]}" }

// LogValue hides the token from slog.
func (Token) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// TokenSource gives the token for calls on one repository. [StaticToken]
// is a personal access token; [*App] mints installation tokens. It must
// be safe for concurrent use.
type TokenSource interface {
	// Token returns a token valid now for owner/repo.
	Token(ctx context.Context, owner, repo string) (Token, error)
}

// forgetter is a TokenSource that can drop a token GitHub refused, so the
// next Token call fetches a new one.
type forgetter interface {
	Forget(owner, repo, value string)
}

// StaticToken is a TokenSource that always gives the same token: a
// fine-grained or classic personal access token.
type StaticToken string

// Token returns the token.
func (s StaticToken) Token(context.Context, string, string) (Token, error) {
	if s == "" {
		return Token{}, errors.New("github: no token configured")
	}
	return Token{Value: string(s)}, nil
}

// Permission levels an App permission may have.
const (
	Read  = "read"
	Write = "write"
)

// Needed are the App permissions Wrench's publisher uses, and what for.
var Needed = []Permission{
	{Name: "contents", Level: Write, For: "clone private repositories and push the wrench/<task> branch"},
	{Name: "pull_requests", Level: Write, For: "find and open pull requests and answer review comments"},
	{Name: "issues", Level: Write, For: "comment on issues and pull request conversations"},
}

// Permission is one App permission at a level.
type Permission struct {
	Name  string // as in the API: "contents", "pull_requests", "issues"
	Level string // Read or Write
	For   string // what Wrench needs it for
}

// ErrMissingPermission matches a [*PermissionError] and a 403 whose
// answer names the permission the call needed.
var ErrMissingPermission = errors.New("github: missing permission")

// PermissionError is a call the token is not allowed to make: its App
// installation (or personal token) lacks a permission.
type PermissionError struct {
	// Repo is "owner/repo".
	Repo string
	// Op is what was being done ("push", "open a pull request", …).
	Op string
	// Permission is the missing one, e.g. "pull_requests"; Level is what
	// is needed and Have what the token has ("" for none).
	Permission, Level, Have string
}

func (e *PermissionError) Error() string {
	have := "none"
	if e.Have != "" {
		have = e.Have
	}
	return fmt.Sprintf("github: cannot %s on %s: the token lacks the %q permission at %s (it has %s); grant %s in the GitHub App's permissions (or the token's) and accept the change on the installation",
		e.Op, e.Repo, e.Permission, e.Level, have, permissionTitle(e.Permission, e.Level))
}

// Is matches ErrMissingPermission.
func (e *PermissionError) Is(target error) bool { return target == ErrMissingPermission }

// permissionTitle is how GitHub's settings page names a permission.
func permissionTitle(name, level string) string {
	title := strings.ReplaceAll(name, "_", " ")
	title = strings.ToUpper(title[:1]) + title[1:]
	access := "Read-only"
	if level == Write {
		access = "Read and write"
	}
	return fmt.Sprintf("%q: %q", title, access)
}

// satisfies reports whether have covers level.
func satisfies(have, level string) bool {
	return have == Write || have == level && level != ""
}

// checkPermission returns a *PermissionError when tok is known to lack
// perm at level; a token of unknown permissions passes.
func checkPermission(tok Token, repo, op, perm, level string) error {
	if tok.Permissions == nil {
		return nil
	}
	if have := tok.Permissions[perm]; !satisfies(have, level) {
		return &PermissionError{Repo: repo, Op: op, Permission: perm, Level: level, Have: have}
	}
	return nil
}

// MissingPermissions lists what of [Needed] perms lacks, in a stable
// order; none when it has them all.
func MissingPermissions(perms map[string]string) []Permission {
	var out []Permission
	for _, p := range Needed {
		if !satisfies(perms[p.Name], p.Level) {
			out = append(out, p)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
