package workspace

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/wrenchworks/wrench/task"
)

// collector is a stranger's https server that records every credential
// sent to it and refuses everything.
type collector struct {
	*httptest.Server
	ca   []byte
	mu   sync.Mutex
	seen []string
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user, pass, ok := r.BasicAuth(); ok {
			c.mu.Lock()
			c.seen = append(c.seen, user+":"+pass)
			c.mu.Unlock()
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
		http.Error(w, "auth required", http.StatusUnauthorized)
	}))
	t.Cleanup(c.Close)
	c.ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate().Raw})
	return c
}

func (c *collector) credentials() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.seen...)
}

// The configured git token used to go to whatever https host a task
// named: anyone allowed to submit could collect it. Now it goes only to
// the hosts it names, whichever way it is configured.
func TestHostileTask_GitTokenStaysOnItsHosts(t *testing.T) {
	const token = "ghp_collectMeIfYouCan"
	for _, tc := range []struct {
		name   string
		auth   *Auth
		source Credentials
	}{
		{name: "token scoped to github.com", auth: &Auth{Token: token, Hosts: []string{"github.com"}}},
		{name: "token naming no host", auth: &Auth{Token: token}},
		{name: "a source answering for any URL", source: CredentialsFunc(func(context.Context, string) (*Auth, error) {
			return &Auth{Token: token, Hosts: []string{"github.com"}}, nil
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stranger := newCollector(t)
			m, logs := testManager(t, false, func(c *Config) { c.CABundle, c.Credentials = stranger.ca, tc.source })
			_, err := m.Open(ctxT(t), "t", task.Repo{URL: stranger.URL + "/acme/calc.git"}, tc.auth)
			if err == nil {
				t.Fatal("clone from the stranger succeeded")
			}
			for _, c := range stranger.credentials() {
				if strings.Contains(c, token) {
					t.Fatalf("the stranger collected the token (%q)", c)
				}
			}
			if strings.Contains(logs.String(), token) || strings.Contains(err.Error(), token) {
				t.Errorf("token in the log or the error: %v", err)
			}
		})
	}
}

// Credentials in the task's URL win over the configured token, go to that
// URL's host, and appear in no error, log line or remote URL.
func TestHostileTask_URLCredentials(t *testing.T) {
	fx := newFixture(t)
	const token = "right-token"
	srv := newGitServer(t, token)
	url := srv.serve(t, fx.dir, "org/repo")
	withCreds := strings.Replace(url, "https://", "https://x-access-token:"+token+"@", 1)
	m, logs := testManager(t, false, func(c *Config) { c.CABundle = srv.ca })

	w, err := m.Open(ctxT(t), "t", task.Repo{URL: withCreds}, localToken("a-configured-token-that-is-wrong"))
	if err != nil {
		t.Fatalf("the URL's credentials were not used: %v", err)
	}
	defer w.Close()
	if strings.Contains(logs.String(), token) || strings.Contains(w.info.Ref+w.BaseCommit(), token) {
		t.Errorf("the URL's password reached the log:\n%s", logs)
	}

	stranger := newCollector(t)
	m2, logs2 := testManager(t, false, func(c *Config) { c.CABundle = stranger.ca })
	bad := strings.Replace(stranger.URL, "https://", "https://x-access-token:hunter2-secret@", 1) + "/r.git?access_token=qtok-secret"
	_, err = m2.Open(ctxT(t), "t", task.Repo{URL: bad}, nil)
	if err == nil {
		t.Fatal("clone succeeded")
	}
	for _, s := range []string{err.Error(), logs2.String()} {
		if strings.Contains(s, "hunter2-secret") || strings.Contains(s, "qtok-secret") {
			t.Errorf("a URL credential leaked: %s", s)
		}
	}
	// Malformed URLs: the error never echoes the password.
	for _, u := range []string{"https://user:hunter2-secret@exa mple.com/r.git", "https://u:hunter2-secret@host%zz/r.git"} {
		_, err := m2.Open(ctxT(t), "t", task.Repo{URL: u}, nil)
		if err == nil || strings.Contains(err.Error(), "hunter2-secret") || !errors.Is(err, ErrUnsupportedURL) {
			t.Errorf("Open(%q) = %v", u, err)
		}
	}
}
