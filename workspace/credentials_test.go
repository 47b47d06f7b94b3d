package workspace

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/wrenchworks/wrench/task"
)

// TestCredentialsSource: the configured source is asked for every clone
// and its credential wins over Open's auth argument; a source with none
// for the repository falls back to the argument; a source's error is a
// clone error, permanent when it wraps ErrAuth.
func TestCredentialsSource(t *testing.T) {
	const token = "ghs_fromTheSource"
	fx := newFixture(t)
	srv := newGitServer(t, token)
	url := srv.serve(t, fx.dir, "org/repo")
	var asked atomic.Int64
	tests := []struct {
		name      string
		source    CredentialsFunc
		auth      *Auth
		wantErr   error
		retriable bool
	}{
		{name: "source wins over the argument", auth: localToken("stale"),
			source: func(_ context.Context, u string) (*Auth, error) {
				if u != url {
					return nil, fmt.Errorf("asked for %q, want %q", u, url)
				}
				return localToken(token), nil
			}},
		{name: "source has none: the argument", auth: localToken(token),
			source: func(context.Context, string) (*Auth, error) { return nil, nil }},
		{name: "source refuses", auth: localToken(token), wantErr: ErrAuth,
			source: func(context.Context, string) (*Auth, error) {
				return nil, fmt.Errorf("no installation for org/repo: %w", ErrAuth)
			}},
		{name: "source unavailable", auth: localToken(token), retriable: true,
			source: func(context.Context, string) (*Auth, error) { return nil, errors.New("api down") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := asked.Load()
			m, logs := testManager(t, false, func(c *Config) {
				c.CABundle = srv.ca
				c.Credentials = CredentialsFunc(func(ctx context.Context, u string) (*Auth, error) {
					asked.Add(1)
					return tt.source(ctx, u)
				})
			})
			w, err := m.Open(ctxT(t), "t", task.Repo{URL: url}, tt.auth)
			if asked.Load() < before+1 {
				t.Errorf("source not asked")
			}
			if tt.wantErr == nil && !tt.retriable {
				if err != nil {
					t.Fatal(err)
				}
				w.Close()
				// Resolving a commit in the mirror fetches with the
				// source's credential too.
				mm, _ := testManager(t, true, func(c *Config) { c.CABundle = srv.ca; c.Credentials = m.cfg.Credentials })
				c, err := mm.Resolve(ctxT(t), task.Repo{URL: url}, tt.auth)
				if err != nil {
					t.Fatalf("Resolve: %v", err)
				}
				c.Close()
				return
			}
			if err == nil {
				w.Close()
				t.Fatal("clone succeeded")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
			if Retriable(err) != tt.retriable {
				t.Errorf("retriable = %v, want %v (%v)", Retriable(err), tt.retriable, err)
			}
			if strings.Contains(logs.String(), token) {
				t.Errorf("token logged:\n%s", logs)
			}
		})
	}
}
