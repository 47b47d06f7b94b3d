package workspace

import (
	"bytes"
	"encoding/pem"
	"errors"
	"io/fs"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/wrenchworks/wrench/task"
)

const httpBackend = "/usr/lib/git-core/git-http-backend"

// gitServer serves repositories under root over https with git's own
// http-backend CGI, requiring basic auth x-access-token:<token>.
type gitServer struct {
	*httptest.Server
	root     string
	ca       []byte
	authOK   atomic.Int64 // requests that carried the token
	packs    atomic.Int64 // upload-pack POSTs (object transfers)
	failNext atomic.Bool  // answer the next request with 500
}

func newGitServer(t *testing.T, token string) *gitServer {
	t.Helper()
	requireGit(t)
	if _, err := os.Stat(httpBackend); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found (required under CI=true)", httpBackend)
		}
		t.Skipf("%s not found; the https tests serve repositories with it", httpBackend)
	}
	s := &gitServer{root: t.TempDir()}
	backend := &cgi.Handler{
		Path:       httpBackend,
		Env:        []string{"GIT_PROJECT_ROOT=" + s.root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"},
		InheritEnv: []string{"PATH"},
	}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.failNext.CompareAndSwap(true, false) {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		user, pass, ok := r.BasicAuth()
		if !ok || user != "x-access-token" || pass != token {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "auth required", http.StatusUnauthorized)
			return
		}
		s.authOK.Add(1)
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
			s.packs.Add(1)
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	s.ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	return s
}

// serve publishes a bare clone of repo as <name>.git and returns its URL.
func (s *gitServer) serve(t *testing.T, repo, name string) string {
	t.Helper()
	runGit(t, "", "clone", "-q", "--bare", repo, filepath.Join(s.root, name+".git"))
	return s.URL + "/" + name + ".git"
}

func TestHTTPS(t *testing.T) {
	const token = "ghs_secretTOKENvalue123"
	fx := newFixture(t)
	srv := newGitServer(t, token)
	url := srv.serve(t, fx.dir, "org/repo")
	tests := []struct {
		name        string
		mirror      bool
		repo        task.Repo
		wantCommit  string
		wantShallow bool
	}{
		{"default branch", false, task.Repo{URL: url}, fx.second, true},
		{"branch", false, task.Repo{URL: url, Ref: "feature"}, fx.feature, true},
		{"annotated tag", false, task.Repo{URL: url, Ref: "v1-ann"}, fx.first, true},
		{"commit (server refuses sha wants)", false, task.Repo{URL: url, Commit: fx.first}, fx.first, false},
		{"short commit", false, task.Repo{URL: url, Commit: fx.first[:8]}, fx.first, false},
		{"mirror branch", true, task.Repo{URL: url, Ref: "feature"}, fx.feature, false},
		{"mirror commit", true, task.Repo{URL: url, Commit: fx.first}, fx.first, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, logs := testManager(t, tt.mirror, func(c *Config) { c.CABundle = srv.ca })
			before := srv.authOK.Load()
			w, err := m.Open(ctxT(t), "t", tt.repo, localToken(token))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if srv.authOK.Load() == before {
				t.Error("the server never saw the token")
			}
			if w.BaseCommit() != tt.wantCommit {
				t.Errorf("BaseCommit = %s, want %s", w.BaseCommit(), tt.wantCommit)
			}
			if w.CloneInfo().Shallow != tt.wantShallow {
				t.Errorf("Shallow = %v, want %v", w.CloneInfo().Shallow, tt.wantShallow)
			}
			if st := runGit(t, w.Dir(), "status", "--porcelain"); st != "" {
				t.Errorf("git status:\n%s", st)
			}
			runGit(t, w.Dir(), "fsck", "--no-progress")
			if got, want := treeListing(t, w.Dir()), gitTreeListing(t, fx.dir, tt.wantCommit); got != want {
				t.Errorf("tree:\n%s\nwant:\n%s", got, want)
			}
			// The token is in no log line and no file (config, refs, packs).
			if strings.Contains(logs.String(), token) {
				t.Errorf("token logged:\n%s", logs)
			}
			if !strings.Contains(logs.String(), "workspace opened") {
				t.Errorf("no log line:\n%s", logs)
			}
			assertNotOnDisk(t, token, m.cfg.Root, m.cfg.MirrorDir)
			if origin := runGit(t, w.Dir(), "remote", "get-url", "origin"); origin != url {
				t.Errorf("origin = %q, want %q", origin, url)
			}
		})
	}
}

func TestHTTPSExactCommitFetch(t *testing.T) {
	const token = "tok"
	fx := newFixture(t)
	srv := newGitServer(t, token)
	url := srv.serve(t, fx.dir, "r")
	runGit(t, filepath.Join(srv.root, "r.git"), "config", "uploadpack.allowReachableSHA1InWant", "true")
	m, _ := testManager(t, false, func(c *Config) { c.CABundle = srv.ca })
	w, err := m.Open(ctxT(t), "t", task.Repo{URL: url, Commit: fx.first}, localToken(token))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.BaseCommit() != fx.first || !w.CloneInfo().Shallow {
		t.Errorf("commit %s shallow %v: want %s fetched one deep", w.BaseCommit(), w.CloneInfo().Shallow, fx.first)
	}
	if n := runGit(t, w.Dir(), "rev-list", "--count", "HEAD"); n != "1" {
		t.Errorf("history has %s commits, want 1", n)
	}
}

func TestHTTPSErrors(t *testing.T) {
	const token = "right-token"
	fx := newFixture(t)
	srv := newGitServer(t, token)
	url := srv.serve(t, fx.dir, "r")
	closed := httptest.NewTLSServer(http.NotFoundHandler())
	closedURL := closed.URL + "/r.git"
	closed.Close()
	tests := []struct {
		name      string
		url       string
		auth      *Auth
		fail      bool
		ca        bool
		wantErr   error
		retriable bool
	}{
		{name: "wrong token", url: url, auth: localToken("wrong"), ca: true, wantErr: ErrAuth},
		{name: "no token", url: url, ca: true, wantErr: ErrAuth},
		{name: "missing repo", url: srv.URL + "/nope.git", auth: localToken(token), ca: true, wantErr: ErrNotFound},
		{name: "server error", url: url, auth: localToken(token), ca: true, fail: true, retriable: true},
		{name: "connection refused", url: closedURL, auth: localToken(token), ca: true, retriable: true},
		{name: "untrusted certificate", url: url, auth: localToken(token)},
		{name: "bad ref", url: url + "", auth: localToken(token), ca: true, wantErr: ErrRefNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, logs := testManager(t, true, func(c *Config) {
				if tt.ca {
					c.CABundle = srv.ca
				}
			})
			srv.failNext.Store(tt.fail)
			repo := task.Repo{URL: tt.url}
			if tt.name == "bad ref" {
				repo.Ref = "missing"
			}
			_, err := m.Open(ctxT(t), "t", repo, tt.auth)
			var ce *CloneError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want *CloneError", err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
			if ce.Retriable != tt.retriable || Retriable(err) != tt.retriable {
				t.Errorf("retriable = %v, want %v (%v)", ce.Retriable, tt.retriable, err)
			}
			if strings.Contains(err.Error(), token) || strings.Contains(logs.String(), token) {
				t.Errorf("token in error or log: %v\n%s", err, logs)
			}
		})
	}
}

func TestHTTPSMirrorReuse(t *testing.T) {
	const token = "tok"
	fx := newFixture(t)
	srv := newGitServer(t, token)
	url := srv.serve(t, fx.dir, "r")
	m, _ := testManager(t, true, func(c *Config) { c.CABundle = srv.ca })
	open := func(repo task.Repo) *Workspace {
		t.Helper()
		w, err := m.Open(ctxT(t), "t", repo, localToken(token))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		return w
	}
	w1 := open(task.Repo{URL: url})
	packs := srv.packs.Load()
	w2 := open(task.Repo{URL: url})
	if w1.CloneInfo().Mirror != "created" || w2.CloneInfo().Mirror != "reused" || !w2.CloneInfo().CheckoutCache {
		t.Errorf("first %+v, second %+v", w1.CloneInfo(), w2.CloneInfo())
	}
	if srv.packs.Load() != packs {
		t.Error("the second Open transferred objects again")
	}
	// A wrong token is refused even though the mirror has everything.
	if _, err := m.Open(ctxT(t), "t", task.Repo{URL: url}, localToken("wrong")); !errors.Is(err, ErrAuth) {
		t.Errorf("wrong token with a warm mirror: %v", err)
	}
	// A new commit upstream is fetched into the mirror.
	writeFile(t, fx.dir, "later.txt", "later\n", 0o644)
	runGit(t, fx.dir, "add", "-A")
	runGit(t, fx.dir, "commit", "-q", "-m", "later")
	runGit(t, fx.dir, "push", "-q", filepath.Join(srv.root, "r.git"), "main")
	w3 := open(task.Repo{URL: url})
	if w3.CloneInfo().Mirror != "updated" || w3.BaseCommit() != runGit(t, fx.dir, "rev-parse", "HEAD") {
		t.Errorf("after a push: %+v at %s", w3.CloneInfo(), w3.BaseCommit())
	}
	if s := m.Stats(); s.MirrorHits != 2 || s.MirrorMisses != 1 {
		t.Errorf("stats %+v", s)
	}
}

// assertNotOnDisk fails when any file under dirs contains secret.
func assertNotOnDisk(t *testing.T, secret string, dirs ...string) {
	t.Helper()
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			if data, err := os.ReadFile(p); err == nil && bytes.Contains(data, []byte(secret)) {
				t.Errorf("%s contains the token", p)
			}
			return nil
		})
	}
}

// localToken is a token for the test servers' host.
func localToken(tok string) *Auth { return &Auth{Token: tok, Hosts: []string{"127.0.0.1"}} }

// TestHTTPSProgress: a clone under WithProgress passes on the server's
// progress messages.
func TestHTTPSProgress(t *testing.T) {
	const token = "ghs_secretTOKENvalue123"
	fx := newFixture(t)
	srv := newGitServer(t, token)
	url := srv.serve(t, fx.dir, "org/progress")
	m, _ := testManager(t, false, func(c *Config) { c.CABundle = srv.ca })
	var progress bytes.Buffer
	w, err := m.Open(WithProgress(ctxT(t), &progress), "t", task.Repo{URL: url}, localToken(token))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if !strings.Contains(progress.String(), "objects") {
		t.Errorf("no progress from the server: %q", progress.String())
	}
}
