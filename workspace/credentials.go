package workspace

import (
	"context"
	"errors"
)

// Credentials gives the credential for one https repository, asked afresh
// for every clone so that a short-lived token (a GitHub App's installation
// token) is current when it is used. A source decides which hosts and
// repositories get a credential at all: nil, nil means "none from me".
// Implementations must be safe for concurrent use and must never log the
// token.
type Credentials interface {
	// Credential returns the credential for repoURL (https, without user
	// info), or nil when this source has none for it. An error wrapping
	// [ErrAuth] is permanent (the repository is not one the credential
	// may see); any other error is treated as passing.
	Credential(ctx context.Context, repoURL string) (*Auth, error)
}

// CredentialsFunc adapts a function to [Credentials].
type CredentialsFunc func(ctx context.Context, repoURL string) (*Auth, error)

// Credential calls f.
func (f CredentialsFunc) Credential(ctx context.Context, repoURL string) (*Auth, error) {
	return f(ctx, repoURL)
}

// credentialFor returns the token an https clone of src uses, or nil: none
// when the URL carries its own credentials (those win, and go to its host
// only); else the configured source's, else auth; and either only when it
// names src's host.
func (m *Manager) credentialFor(ctx context.Context, src source, auth *Auth) (*Auth, error) {
	if src.user != nil {
		return nil, nil
	}
	if m.cfg.Credentials != nil {
		a, err := m.cfg.Credentials.Credential(ctx, src.fetchURL)
		if err != nil {
			return nil, &CloneError{URL: src.display, Op: "get credentials", Retriable: !errors.Is(err, ErrAuth), Err: err, secrets: src.secrets}
		}
		if a != nil {
			auth = a
		}
	}
	if auth == nil || auth.Token == "" || !auth.allows(src.host) {
		return nil, nil
	}
	return auth, nil
}
